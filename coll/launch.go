package coll

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
)

// Launch is where a rank's identity comes from: rank, size and the
// rendezvous, and the launcher that gave them. Discover fills it from a
// launcher's environment — the package's one reading of environment
// variables, and only through the lookup function it is given.
type Launch struct {
	// Rank, Size and LocalRank; Size 0 means unknown.
	Rank, Size, LocalRank int
	// LocalSize is the number of ranks on this host, 0 if the launcher
	// does not say (Config.LocalSize).
	LocalSize int
	// Rendezvous is "host:port" or "file://DIR" (Config.Rendezvous).
	Rendezvous string
	// JobID names the job (the launcher's job or run ID).
	JobID string
	// Addr is the data-plane address, if the environment gives one
	// (GOROCE_ADDR).
	Addr netip.AddrPort
	// Source names where rank and size came from, with the variables;
	// RendezvousSource where the rendezvous did.
	Source, RendezvousSource string
}

// Config returns a Config with l's rank, size, rendezvous, job and
// address; the caller sets the rest.
func (l Launch) Config() Config {
	return Config{Rank: l.Rank, Size: l.Size, LocalRank: l.LocalRank, LocalSize: l.LocalSize,
		Rendezvous: l.Rendezvous, JobID: l.JobID, Addr: l.Addr}
}

// String says which rank this is and where that came from, for a
// program's log: "rank 1 of 4 (local 1) from torchrun (RANK, …);
// rendezvous 127.0.0.1:29501 from torchrun (…)".
func (l Launch) String() string {
	s := fmt.Sprintf("rank %d of %d (local %d) from %s", l.Rank, l.Size, l.LocalRank, l.Source)
	if l.Size > 1 {
		s += fmt.Sprintf("; rendezvous %s from %s", l.Rendezvous, l.RendezvousSource)
	}
	if l.JobID != "" {
		s += fmt.Sprintf("; job %q", l.JobID)
	}
	return s
}

// Environment variables of goroce's own launch path (goroce coll -np N
// sets them for each rank it spawns).
const (
	EnvRank      = "GOROCE_RANK"
	EnvSize      = "GOROCE_WORLD_SIZE"
	EnvLocalRank = "GOROCE_LOCAL_RANK"
	EnvLocalSize = "GOROCE_LOCAL_SIZE"
	EnvRdzv      = "GOROCE_RDZV"
	EnvJobID     = "GOROCE_JOB_ID"
	EnvAddr      = "GOROCE_ADDR"
)

// Discover returns this process's Launch: explicit's rank and size if it
// has them (Size > 0), else the first launcher whose variables give a
// complete set — rank, size and a rendezvous — in this order:
//
//  1. explicit (a program's flags);
//  2. goroce's own: GOROCE_RANK, GOROCE_WORLD_SIZE, GOROCE_LOCAL_RANK,
//     GOROCE_LOCAL_SIZE, GOROCE_RDZV, GOROCE_JOB_ID;
//  3. torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
//     MASTER_ADDR and MASTER_PORT, or MASTER_PORT+1 when
//     TORCHELASTIC_USE_AGENT_STORE is True (the agent's own store holds
//     MASTER_PORT); job TORCHELASTIC_RUN_ID (with the port when it is
//     "none", torchrun's default);
//  4. Open MPI: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE;
//     job OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE;
//  5. MPICH (Hydra): PMI_RANK, PMI_SIZE, MPI_LOCALRANKID,
//     MPI_LOCALNRANKS; job PMI_KVSNAME or PMIX_NAMESPACE;
//  6. Slurm: SLURM_PROCID, SLURM_NTASKS or SLURM_STEP_NUM_TASKS,
//     SLURM_LOCALID; rendezvous on the first host of SLURM_STEP_NODELIST
//     (a compressed host list, expanded), port the first of
//     SLURM_STEP_RESV_PORTS or else 20000 + (31·SLURM_JOB_ID +
//     SLURM_STEP_ID) mod 20000; job SLURM_JOB_ID.SLURM_STEP_ID; all
//     ranks local when the node list is one host.
//
// explicit.Rendezvous, then GOROCE_RDZV, override any launcher's address
// and complete a launcher that has none (Open MPI, MPICH). A launcher
// without an address gives way to a later complete one of the same size
// (srun --mpi=pmi2 sets PMI_RANK and Slurm's variables alike), but not to
// one of another size (mpirun inside a Slurm allocation inherits the
// allocation's variables). If no complete set is found, the first
// launcher is used with
// file://$TMPDIR/goroce-rdzv, a directory the ranks of one host share;
// with no launcher at all the process is rank 0 of 1. GOROCE_ADDR, if
// set, is the data-plane address (Config.Addr); it may hold one address
// per local rank, comma-separated.
func Discover(explicit Launch, lookup func(string) (string, bool)) (Launch, error) {
	get := func(k string) string {
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	override, overrideFrom := explicit.Rendezvous, "flags"
	if override == "" {
		if v := get(EnvRdzv); v != "" {
			override, overrideFrom = v, EnvRdzv
		}
	}
	finders := []func(func(string) string) (Launch, bool, error){
		func(func(string) string) (Launch, bool, error) {
			if explicit.Size <= 0 {
				return Launch{}, false, nil
			}
			l := explicit
			if l.Source == "" {
				l.Source = "flags"
			}
			if l.Rendezvous != "" {
				l.RendezvousSource = "flags"
			}
			return l, true, nil
		},
		fromGoroce, fromTorchrun, fromOpenMPI, fromMPICH, fromSlurm,
	}
	var first *Launch
	for _, f := range finders {
		l, ok, err := f(get)
		if err != nil {
			return Launch{}, err
		}
		if !ok {
			continue
		}
		if override != "" {
			l.Rendezvous, l.RendezvousSource = override, overrideFrom
		}
		complete := l.Rendezvous != "" || l.Size == 1
		if complete && first != nil && l.Size != first.Size {
			// An outer launcher (mpirun inside a Slurm allocation): its
			// variables describe another set of processes.
			continue
		}
		if complete {
			return finish(l, explicit, get)
		}
		if first == nil {
			first = &l
		}
	}
	if first != nil {
		tmp := get("TMPDIR")
		if tmp == "" {
			tmp = "/tmp"
		}
		first.Rendezvous = "file://" + filepath.Join(tmp, "goroce-rdzv")
		first.RendezvousSource = "the default for a launcher that gives no address (a directory the ranks of one host share; set " + EnvRdzv + " across hosts)"
		return finish(*first, explicit, get)
	}
	l := Launch{Rank: 0, Size: 1, Source: "no launcher (a job of one rank)"}
	if override != "" {
		l.Rendezvous, l.RendezvousSource = override, overrideFrom
	}
	return finish(l, explicit, get)
}

// finish adds the job ID and data-plane address overrides.
func finish(l Launch, explicit Launch, get func(string) string) (Launch, error) {
	if explicit.JobID != "" {
		l.JobID = explicit.JobID
	} else if v := get(EnvJobID); v != "" {
		l.JobID = v
	}
	if explicit.Addr.IsValid() {
		l.Addr = explicit.Addr
	} else if v := get(EnvAddr); v != "" {
		a, err := pickAddr(v, l.LocalRank)
		if err != nil {
			return Launch{}, err
		}
		l.Addr = a
	}
	return l, nil
}

// pickAddr parses GOROCE_ADDR: one address (port optional), or a list
// indexed by local rank.
func pickAddr(v string, local int) (netip.AddrPort, error) {
	list := strings.Split(v, ",")
	s := strings.TrimSpace(list[0])
	if len(list) > 1 {
		if local < 0 || local >= len(list) {
			return netip.AddrPort{}, fmt.Errorf("%w: %s lists %d addresses, local rank %d", ErrInvalidArg, EnvAddr, len(list), local)
		}
		s = strings.TrimSpace(list[local])
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: %s=%q: %v", ErrInvalidArg, EnvAddr, v, err)
	}
	return netip.AddrPortFrom(a, 4791), nil
}

// ints parses the named variables as non-negative integers; a variable
// that is unset gives ok false, one that does not parse an error.
func ints(get func(string) string, names ...string) ([]int, bool, error) {
	out := make([]int, len(names))
	for i, n := range names {
		v := get(n)
		if v == "" {
			return nil, false, nil
		}
		x, err := strconv.Atoi(v)
		if err != nil || x < 0 {
			return nil, false, fmt.Errorf("%w: %s=%q is not a rank or a count", ErrInvalidArg, n, v)
		}
		out[i] = x
	}
	return out, true, nil
}

// local returns the optional local rank variable (0 when unset).
func local(get func(string) string, name string) (int, error) {
	v, ok, err := ints(get, name)
	if !ok || err != nil {
		return 0, err
	}
	return v[0], nil
}

// localSize reads an optional local-size variable (0 when unset or bad).
func localSize(get func(string) string, name string) int {
	v, ok, err := ints(get, name)
	if !ok || err != nil {
		return 0
	}
	return v[0]
}

// rankSize reads a launcher's rank and size and checks them.
func rankSize(get func(string) string, rank, size, localName, source string) (Launch, bool, error) {
	v, ok, err := ints(get, rank, size)
	if !ok || err != nil {
		return Launch{}, false, err
	}
	if v[1] < 1 || v[0] >= v[1] {
		return Launch{}, false, fmt.Errorf("%w: %s=%d with %s=%d", ErrInvalidArg, rank, v[0], size, v[1])
	}
	lr, err := local(get, localName)
	if err != nil {
		return Launch{}, false, err
	}
	return Launch{Rank: v[0], Size: v[1], LocalRank: lr,
		Source: fmt.Sprintf("%s (%s, %s, %s)", source, rank, size, localName)}, true, nil
}

func fromGoroce(get func(string) string) (Launch, bool, error) {
	l, ok, err := rankSize(get, EnvRank, EnvSize, EnvLocalRank, "goroce")
	if !ok || err != nil {
		return l, ok, err
	}
	l.LocalSize = localSize(get, EnvLocalSize)
	if v := get(EnvRdzv); v != "" {
		l.Rendezvous, l.RendezvousSource = v, EnvRdzv
	}
	return l, true, nil
}

func fromTorchrun(get func(string) string) (Launch, bool, error) {
	l, ok, err := rankSize(get, "RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun")
	if !ok || err != nil {
		return l, ok, err
	}
	l.LocalSize = localSize(get, "LOCAL_WORLD_SIZE")
	host, port := get("MASTER_ADDR"), get("MASTER_PORT")
	l.JobID = get("TORCHELASTIC_RUN_ID")
	if l.JobID == "" || l.JobID == "none" {
		// torchrun's default run ID is "none" for every job: the port
		// tells two jobs on one host apart.
		l.JobID = "torchrun-" + port
	}
	if host == "" || port == "" {
		return l, true, nil
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return Launch{}, false, fmt.Errorf("%w: MASTER_PORT=%q", ErrInvalidArg, port)
	}
	from := "torchrun (MASTER_ADDR, MASTER_PORT)"
	if strings.EqualFold(get("TORCHELASTIC_USE_AGENT_STORE"), "true") {
		// The elastic agent's store already listens on MASTER_PORT.
		p++
		from = "torchrun (MASTER_ADDR, MASTER_PORT+1: TORCHELASTIC_USE_AGENT_STORE=True, the agent's store holds MASTER_PORT)"
	}
	if p > 65535 {
		return Launch{}, false, fmt.Errorf("%w: MASTER_PORT=%q leaves no port above it", ErrInvalidArg, port)
	}
	l.Rendezvous, l.RendezvousSource = net.JoinHostPort(host, strconv.Itoa(p)), from
	return l, true, nil
}

func fromOpenMPI(get func(string) string) (Launch, bool, error) {
	l, ok, err := rankSize(get, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI")
	if !ok || err != nil {
		return l, ok, err
	}
	l.JobID = firstOf(get, "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE")
	l.LocalSize = localSize(get, "OMPI_COMM_WORLD_LOCAL_SIZE")
	return l, true, nil
}

func fromMPICH(get func(string) string) (Launch, bool, error) {
	l, ok, err := rankSize(get, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPICH")
	if !ok || err != nil {
		return l, ok, err
	}
	l.JobID = firstOf(get, "PMI_KVSNAME", "PMIX_NAMESPACE")
	l.LocalSize = localSize(get, "MPI_LOCALNRANKS")
	return l, true, nil
}

func fromSlurm(get func(string) string) (Launch, bool, error) {
	sizeVar := "SLURM_NTASKS"
	if get(sizeVar) == "" {
		sizeVar = "SLURM_STEP_NUM_TASKS"
	}
	l, ok, err := rankSize(get, "SLURM_PROCID", sizeVar, "SLURM_LOCALID", "Slurm")
	if !ok || err != nil {
		return l, ok, err
	}
	job, step := get("SLURM_JOB_ID"), get("SLURM_STEP_ID")
	if job != "" {
		l.JobID = job
		if step != "" {
			l.JobID += "." + step
		}
	}
	listVar := "SLURM_STEP_NODELIST"
	list := get(listVar)
	for _, alt := range []string{"SLURM_JOB_NODELIST", "SLURM_NODELIST"} {
		if list == "" {
			listVar, list = alt, get(alt)
		}
	}
	if list == "" {
		return l, true, nil
	}
	hosts, err := ExpandHostlist(list)
	if err != nil || len(hosts) == 0 {
		return Launch{}, false, fmt.Errorf("%w: %s=%q: %v", ErrInvalidArg, listVar, list, err)
	}
	if len(hosts) == 1 {
		l.LocalSize = l.Size
	}
	port, from := 0, ""
	if rp := get("SLURM_STEP_RESV_PORTS"); rp != "" {
		first, _, _ := strings.Cut(strings.Split(rp, ",")[0], "-")
		p, err := strconv.Atoi(first)
		if err != nil || p <= 0 || p > 65535 {
			return Launch{}, false, fmt.Errorf("%w: SLURM_STEP_RESV_PORTS=%q", ErrInvalidArg, rp)
		}
		port, from = p, "SLURM_STEP_RESV_PORTS"
	} else {
		j, _ := strconv.Atoi(job)
		s, _ := strconv.Atoi(step)
		port = 20000 + (31*j+s)%20000
		from = "20000 + (31·SLURM_JOB_ID + SLURM_STEP_ID) mod 20000"
	}
	l.Rendezvous = net.JoinHostPort(hosts[0], strconv.Itoa(port))
	l.RendezvousSource = fmt.Sprintf("Slurm (first host of %s, port %s)", listVar, from)
	return l, true, nil
}

func firstOf(get func(string) string, names ...string) string {
	for _, n := range names {
		if v := get(n); v != "" {
			return v
		}
	}
	return ""
}

// ExpandHostlist expands a Slurm host list: comma-separated names, each
// with any number of bracketed ranges and lists, zero padding kept:
// "node[01-03,07],gpu5" is node01 node02 node03 node07 gpu5, and
// "rack[1-2]-n[1-2]" is rack1-n1 rack1-n2 rack2-n1 rack2-n2.
func ExpandHostlist(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '[':
				depth++
				if depth > 1 {
					return nil, fmt.Errorf("%w: nested brackets in host list %q", ErrInvalidArg, s)
				}
				continue
			case ']':
				depth--
				if depth < 0 {
					return nil, fmt.Errorf("%w: unbalanced ']' in host list %q", ErrInvalidArg, s)
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if depth != 0 {
			return nil, fmt.Errorf("%w: unbalanced '[' in host list %q", ErrInvalidArg, s)
		}
		if name := strings.TrimSpace(s[start:i]); name != "" {
			hosts, err := expandHost(name)
			if err != nil {
				return nil, err
			}
			out = append(out, hosts...)
			if len(out) > 1<<20 {
				return nil, fmt.Errorf("%w: host list %q expands past %d hosts", ErrInvalidArg, s, 1<<20)
			}
		}
		start = i + 1
	}
	return out, nil
}

// expandHost expands one name's bracket groups, left to right.
func expandHost(name string) ([]string, error) {
	open := strings.IndexByte(name, '[')
	if open < 0 {
		return []string{name}, nil
	}
	end := strings.IndexByte(name[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%w: unbalanced '[' in host %q", ErrInvalidArg, name)
	}
	end += open
	prefix, body, rest := name[:open], name[open+1:end], name[end+1:]
	tails, err := expandHost(rest)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, item := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a || b-a > 1<<20 {
			return nil, fmt.Errorf("%w: range %q in host %q", ErrInvalidArg, item, name)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		for v := a; v <= b; v++ {
			for _, t := range tails {
				out = append(out, fmt.Sprintf("%s%0*d%s", prefix, width, v, t))
			}
			if len(out) > 1<<20 {
				return nil, fmt.Errorf("%w: host %q expands past %d hosts", ErrInvalidArg, name, 1<<20)
			}
		}
	}
	return out, nil
}
