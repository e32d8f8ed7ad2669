package coll_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/goroce/goroce/coll"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDiscover(t *testing.T) {
	tests := []struct {
		name     string
		explicit coll.Launch
		env      []string
		rank     int
		size     int
		local    int
		rdzv     string
		job      string
		source   string // a word of Source
		rsource  string // a word of RendezvousSource
		addr     string
		lsize    int
	}{
		{name: "nothing: one rank", rank: 0, size: 1, source: "no launcher"},
		{name: "flags", explicit: coll.Launch{Rank: 2, Size: 4, Rendezvous: "10.0.0.1:1234"},
			env:  []string{"RANK", "0", "WORLD_SIZE", "8", "MASTER_ADDR", "h", "MASTER_PORT", "1"},
			rank: 2, size: 4, rdzv: "10.0.0.1:1234", source: "flags", rsource: "flags"},
		{name: "goroce", env: []string{"GOROCE_RANK", "3", "GOROCE_WORLD_SIZE", "4", "GOROCE_LOCAL_RANK", "1", "GOROCE_RDZV", "127.0.0.1:5000", "GOROCE_JOB_ID", "j1",
			"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "x", "MASTER_PORT", "9"},
			rank: 3, size: 4, local: 1, rdzv: "127.0.0.1:5000", job: "j1", source: "goroce", rsource: "GOROCE_RDZV"},
		{name: "torchrun", env: []string{"RANK", "1", "WORLD_SIZE", "2", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "29500", "TORCHELASTIC_RUN_ID", "run7"},
			rank: 1, size: 2, local: 1, lsize: 2, rdzv: "127.0.0.1:29500", job: "run7", source: "torchrun", rsource: "MASTER_PORT)"},
		{name: "torchrun with the agent store", env: []string{"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "node1", "MASTER_PORT", "29500", "TORCHELASTIC_USE_AGENT_STORE", "True"},
			rank: 0, size: 2, rdzv: "node1:29501", job: "torchrun-29500", source: "torchrun", rsource: "MASTER_PORT+1"},
		{name: "GOROCE_RDZV overrides torchrun's", env: []string{"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "node1", "MASTER_PORT", "29500", "GOROCE_RDZV", "file:///shared"},
			rank: 0, size: 2, rdzv: "file:///shared", job: "torchrun-29500", source: "torchrun", rsource: "GOROCE_RDZV"},
		{name: "Open MPI: default file rendezvous", env: []string{"OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_SIZE", "3", "OMPI_COMM_WORLD_LOCAL_RANK", "2", "OMPI_MCA_ess_base_jobid", "4242", "TMPDIR", "/t",
			"SLURM_PROCID", "0", "SLURM_NTASKS", "1", "SLURM_STEP_NODELIST", "n1"},
			rank: 2, size: 3, local: 2, rdzv: "file:///t/goroce-rdzv", job: "4242", source: "Open MPI", rsource: "default"},
		{name: "MPICH with GOROCE_RDZV", env: []string{"PMI_RANK", "1", "PMI_SIZE", "2", "GOROCE_RDZV", "h:1"},
			rank: 1, size: 2, rdzv: "h:1", source: "MPICH", rsource: "GOROCE_RDZV"},
		{name: "srun --mpi=pmi2: Slurm's address completes the set MPICH's lacks", env: []string{"PMI_RANK", "1", "PMI_SIZE", "4",
			"SLURM_PROCID", "1", "SLURM_NTASKS", "4", "SLURM_LOCALID", "1", "SLURM_STEP_NODELIST", "gpu[07-09],cpu1", "SLURM_JOB_ID", "123", "SLURM_STEP_ID", "4"},
			rank: 1, size: 4, local: 1, rdzv: "gpu07:23817", job: "123.4", source: "Slurm", rsource: "SLURM_STEP_NODELIST"},
		{name: "Slurm on one node: every rank local", env: []string{"SLURM_PROCID", "2", "SLURM_NTASKS", "3", "SLURM_LOCALID", "2", "SLURM_STEP_NODELIST", "vm", "SLURM_JOB_ID", "1", "SLURM_STEP_ID", "0"},
			rank: 2, size: 3, local: 2, lsize: 3, rdzv: "vm:20031", job: "1.0", source: "Slurm", rsource: "SLURM_STEP_NODELIST"},
		{name: "Open MPI local size", env: []string{"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_SIZE", "2", "GOROCE_RDZV", "h:2"},
			rank: 0, size: 2, lsize: 2, rdzv: "h:2", source: "Open MPI", rsource: "GOROCE_RDZV"},
		{name: "Slurm reserved ports", env: []string{"SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_STEP_NODELIST", "a[1-2]", "SLURM_STEP_RESV_PORTS", "12001-12004", "SLURM_JOB_ID", "9"},
			rank: 0, size: 2, rdzv: "a1:12001", job: "9", source: "Slurm", rsource: "RESV_PORTS"},
		{name: "GOROCE_ADDR by local rank", env: []string{"GOROCE_RANK", "1", "GOROCE_WORLD_SIZE", "2", "GOROCE_LOCAL_RANK", "1", "GOROCE_RDZV", "h:1", "GOROCE_ADDR", "10.0.0.1,10.0.0.2"},
			rank: 1, size: 2, local: 1, rdzv: "h:1", source: "goroce", addr: "10.0.0.2:4791"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := coll.Discover(tc.explicit, env(tc.env...))
			require.NoError(t, err)
			assert.Equal(t, tc.rank, l.Rank)
			assert.Equal(t, tc.size, l.Size)
			assert.Equal(t, tc.local, l.LocalRank)
			assert.Equal(t, tc.rdzv, l.Rendezvous)
			assert.Equal(t, tc.job, l.JobID)
			assert.Contains(t, l.Source, tc.source)
			assert.Contains(t, l.RendezvousSource, tc.rsource)
			assert.Equal(t, tc.lsize, l.LocalSize)
			if tc.addr != "" {
				assert.Equal(t, netip.MustParseAddrPort(tc.addr), l.Addr)
			}
			assert.True(t, strings.HasPrefix(l.String(), "rank "), l.String())
		})
	}
}

func TestDiscoverRefusesBadValues(t *testing.T) {
	for _, e := range [][]string{
		{"RANK", "x", "WORLD_SIZE", "2"},
		{"RANK", "2", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1"},
		{"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "99999"},
		{"SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_STEP_NODELIST", "n[1-"},
		{"GOROCE_RANK", "0", "GOROCE_WORLD_SIZE", "2", "GOROCE_RDZV", "h:1", "GOROCE_ADDR", "not-an-ip"},
	} {
		_, err := coll.Discover(coll.Launch{}, env(e...))
		assert.ErrorIs(t, err, coll.ErrInvalidArg, "%v", e)
	}
}

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"n1", []string{"n1"}},
		{"node[01-03,07],gpu5", []string{"node01", "node02", "node03", "node07", "gpu5"}},
		{"rack[1-2]-n[1-2]", []string{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}},
		{"x[098-100]", []string{"x098", "x099", "x100"}},
		{"a,b[8-10]", []string{"a", "b8", "b9", "b10"}},
		{"h-1.example.com", []string{"h-1.example.com"}},
	}
	for _, tc := range tests {
		got, err := coll.ExpandHostlist(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	for _, bad := range []string{"n[1-", "n]", "n[[1]]", "n[3-1]", "n[a-b]", "n[1-9999999]"} {
		_, err := coll.ExpandHostlist(bad)
		assert.ErrorIs(t, err, coll.ErrInvalidArg, bad)
	}
}
