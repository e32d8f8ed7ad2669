package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goroce/goroce/coll"
)

// jsonDoc is nccl-tests' JSON output (-J, its util.cu, format version 3),
// with the same keys in the same order, and goroce's additions under
// "goroce" keys that nccl-tests' readers ignore.
type jsonDoc struct {
	Version     int          `json:"version"`
	StartTime   string       `json:"start_time"`
	Args        []string     `json:"args"`
	Env         []string     `json:"env"`
	NCCLVersion int          `json:"nccl_version"`
	Config      jsonConfig   `json:"config"`
	Results     []jsonResult `json:"results"`
	OutOfBounds struct {
		Count int    `json:"count"`
		Okay  string `json:"okay"`
	} `json:"out_of_bounds"`
	AverageBusBandwidth struct {
		Bandwidth float64 `json:"bandwidth"`
		Okay      string  `json:"okay"`
	} `json:"average_bus_bandwidth"`
	Errors  []string   `json:"errors"`
	EndTime string     `json:"end_time"`
	Goroce  jsonGoroce `json:"goroce"`
}

type jsonConfig struct {
	NThreads             int          `json:"nthreads"`
	NGPUs                int          `json:"ngpus"`
	MinimumBytes         int          `json:"minimum_bytes"`
	MaximumBytes         int          `json:"maximum_bytes"`
	StepFactor           *int         `json:"step_factor,omitempty"`
	StepBytes            *int         `json:"step_bytes,omitempty"`
	WarmupIters          int          `json:"warmup_iters"`
	Iterations           int          `json:"iterations"`
	AggregatedIterations int          `json:"aggregated_iterations"`
	Validation           int          `json:"validation"`
	Graph                int          `json:"graph"`
	BlockingCollectives  string       `json:"blocking_collectives"`
	PerIterTiming        string       `json:"per_iter_timing"`
	PerIterSkip          int          `json:"per_iter_skip"`
	ParallelInit         string       `json:"parallel_init"`
	Devices              []jsonDevice `json:"devices"`
}

type jsonDevice struct {
	Rank       int    `json:"rank"`
	Group      int    `json:"group"`
	Pid        int    `json:"pid"`
	Hostname   string `json:"hostname"`
	Device     int    `json:"device"`
	DeviceHex  string `json:"device_hex"`
	DeviceInfo string `json:"device_info"`
}

type jsonResult struct {
	Size             int      `json:"size"`
	Count            int      `json:"count"`
	Type             string   `json:"type"`
	Redop            string   `json:"redop"`
	Root             string   `json:"root"`
	OutOfPlace       jsonHalf `json:"out_of_place"`
	InPlace          jsonHalf `json:"in_place"`
	ActualIterations int      `json:"actual_iterations"`
	ExperimentName   string   `json:"experiment_name"`
}

type jsonHalf struct {
	Time   float64  `json:"time"`
	AlgBw  float64  `json:"alg_bw"`
	BusBw  float64  `json:"bus_bw"`
	NWrong *float64 `json:"nwrong"`
	// goroce's: the spread of the time over the ranks, busbw against the
	// ceiling, and busbw × ranks against it (the bytes the whole job moves
	// against what one pair moves alone).
	TimeMinUs      float64 `json:"goroce_time_min"`
	TimeMaxUs      float64 `json:"goroce_time_max"`
	BusBwCeiling   float64 `json:"goroce_bus_bw_ceiling,omitempty"`
	RanksBusBwCeil float64 `json:"goroce_ranks_bus_bw_ceiling,omitempty"`
}

// jsonGoroce is what goroce adds to the document.
type jsonGoroce struct {
	Collective  string  `json:"collective"`
	Ranks       int     `json:"ranks"`
	Launch      string  `json:"launch"`
	Algorithm   string  `json:"algorithm"`
	Channels    int     `json:"channels"`
	QPsPerConn  int     `json:"qps_per_conn"`
	Split       bool    `json:"split"`
	Chunk       int     `json:"chunk"`
	Steps       int     `json:"steps"`
	TClass      int     `json:"tclass"`
	SourcePorts string  `json:"sport"`
	CeilingGBps float64 `json:"ceiling_gbps"`
	Impair      string  `json:"impair,omitempty"`
	GOMAXPROCS  int     `json:"gomaxprocs"`
	CPUs        int     `json:"cpus"`
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

const jsonTime = "2006-01-02 15:04:05"

// newJSONDoc starts the document as jsonOutputInit and writeDeviceReport
// do.
func newJSONDoc(f *collFlags, args []string, c *coll.Comm) *jsonDoc {
	d := &jsonDoc{Version: 3, StartTime: time.Now().Format(jsonTime), Args: append([]string{"goroce", "coll"}, args...),
		Env: os.Environ(), Errors: []string{}}
	cf := jsonConfig{NThreads: 1, NGPUs: 1, MinimumBytes: f.minBytes, MaximumBytes: f.maxBytes,
		WarmupIters: f.warmup, Iterations: f.iters, AggregatedIterations: f.agg, Validation: f.check,
		BlockingCollectives: boolStr(f.blocking != 0), PerIterTiming: "false", ParallelInit: "false"}
	if f.stepFactor > 1 {
		v := f.stepFactor
		cf.StepFactor = &v
	} else {
		v := f.stepBytes
		cf.StepBytes = &v
	}
	for _, p := range c.Peers() {
		cf.Devices = append(cf.Devices, jsonDevice{Rank: p.Rank, Pid: p.Pid, Hostname: shortHost(p.Host),
			Device: p.LocalRank, DeviceHex: "0000:00:00", DeviceInfo: deviceInfo(p)})
	}
	d.Config = cf
	return d
}

func (d *jsonDoc) addResult(b *bench, size int, dt coll.DataType, opName string, root, param int, h [2]half) {
	sendC, recvC, _, _, _ := b.t.counts(size/dt.Size(), dt.Size(), b.n)
	r := jsonResult{Size: max(sendC, recvC) * dt.Size(), Count: param, Type: dt.String(), Redop: opName,
		Root: fmt.Sprintf("%6d", root), ActualIterations: b.f.iters}
	for i, dst := range []*jsonHalf{&r.OutOfPlace, &r.InPlace} {
		*dst = jsonHalf{Time: h[i].timeUs, AlgBw: h[i].algbw, BusBw: h[i].busbw, TimeMinUs: h[i].minUs, TimeMaxUs: h[i].maxUs}
		if h[i].check {
			w := float64(h[i].wrong)
			dst.NWrong = &w
		}
		if b.ceiling > 0 {
			dst.BusBwCeiling = h[i].busbw / b.ceiling
			dst.RanksBusBwCeil = h[i].busbw * float64(b.n) / b.ceiling
		}
	}
	d.Results = append(d.Results, r)
}

// finish adds the footer's values.
func (d *jsonDoc) finish(errors int, avgBw, minBw float64, lastErr string) {
	d.OutOfBounds.Count, d.OutOfBounds.Okay = errors, boolStr(errors == 0)
	d.AverageBusBandwidth.Bandwidth = avgBw
	d.AverageBusBandwidth.Okay = "unchecked"
	if minBw >= 0 {
		d.AverageBusBandwidth.Okay = boolStr(avgBw >= minBw*0.9)
	}
	if lastErr != "" {
		d.Errors = append(d.Errors, lastErr)
	}
	d.EndTime = time.Now().Format(jsonTime)
}

func (d *jsonDoc) write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// openJSONFile opens path as nccl-tests' -J does: only a name ending in
// .json (any case) is written; an existing file is kept and path.0,
// path.1, … tried instead. It returns nil and no error for other names.
func openJSONFile(path string) (*os.File, error) {
	if !strings.EqualFold(filepath.Ext(path), ".json") {
		return nil, nil
	}
	try := path
	for i := 0; ; i++ {
		f, err := os.OpenFile(try, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		try = fmt.Sprintf("%s.%d", path, i)
	}
}
