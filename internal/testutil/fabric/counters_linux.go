//go:build linux

package fabric

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// Spines is a snapshot of the packets leaf A sent to each spine (AB[k]:
// traffic from side A to side B through spine k) and leaf B sent to each
// spine (BA[k]), from the veth counters (`ip -s -j link`). Counters count
// packets as the kernel forwards them; a GSO super-packet that stays whole
// on veth counts once.
type Spines struct {
	AB, BA []uint64
}

// SpineCounters reads the counters now.
func (f *Fabric) SpineCounters() (Spines, error) {
	ab, err := txPackets(f.LeafA, f.SpineDevA)
	if err != nil {
		return Spines{}, err
	}
	ba, err := txPackets(f.LeafB, f.SpineDevB)
	if err != nil {
		return Spines{}, err
	}
	return Spines{AB: ab, BA: ba}, nil
}

// Sub returns s - o, link by link.
func (s Spines) Sub(o Spines) Spines {
	d := Spines{AB: make([]uint64, len(s.AB)), BA: make([]uint64, len(s.BA))}
	for k := range s.AB {
		d.AB[k] = s.AB[k] - o.AB[k]
		d.BA[k] = s.BA[k] - o.BA[k]
	}
	return d
}

// Balance returns the total, the largest count, the mean and max/mean of
// counts, and how many are below idle (a spine that carried fewer packets
// than that counts as idle).
func Balance(counts []uint64, idle uint64) (total, maxN uint64, mean, ratio float64, idles int) {
	for _, c := range counts {
		total += c
		maxN = max(maxN, c)
		if c < idle {
			idles++
		}
	}
	if len(counts) == 0 || total == 0 {
		return total, maxN, 0, 0, idles
	}
	mean = float64(total) / float64(len(counts))
	return total, maxN, mean, float64(maxN) / mean, idles
}

// txPackets returns the tx packet counters of devs in namespace ns.
func txPackets(ns string, devs []string) ([]uint64, error) {
	out, err := exec.Command("ip", "-n", ns, "-s", "-j", "link", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip -n %s -s -j link: %w", ns, err)
	}
	var links []struct {
		Name  string `json:"ifname"`
		Stats struct {
			TX struct {
				Packets uint64 `json:"packets"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("ip -n %s -s -j link: %w", ns, err)
	}
	byName := map[string]uint64{}
	for _, l := range links {
		byName[l.Name] = l.Stats.TX.Packets
	}
	n := make([]uint64, len(devs))
	for i, d := range devs {
		v, ok := byName[d]
		if !ok {
			return nil, fmt.Errorf("no interface %s in %s (%s)", d, ns, strings.TrimSpace(string(out)))
		}
		n[i] = v
	}
	return n, nil
}
