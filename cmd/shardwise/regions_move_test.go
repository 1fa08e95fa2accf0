package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRegionsApplyMovesARegionBetweenZoneProcesses runs, as an operator
// would and as the README's how-to does, two "shardwise zone" processes of
// the wander module, then "shardwise regions apply" of a table that gives
// region 0 of zone-a to zone-b, and reads both nodes' Prometheus metrics.
//
// A wanderer never leaves its spawn region (wander's Roam is 0), so the
// entities standing in region 0 are one set at every tick, and before the
// move no entity is ever handed over. After it: zone-a simulates none in
// region 0 and has sent and had acked exactly as many handoffs as region 0
// held; zone-b simulates that many there and adopted that many; each
// node's total moved by that many and the sum is what it was; nothing is
// left frozen, refused, aborted or stale. Counts being equal with no
// handoff refused and the sum conserved, no entity was lost, duplicated
// or replaced by another on the way.
func TestRegionsApplyMovesARegionBetweenZoneProcesses(t *testing.T) {
	t.Parallel() // waits on processes and sockets: see main_test.go
	eps, _ := etcdForCmdTest(t)
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	runShardwise(t, "certs", "--dir", certs, "--nodes", "zone-a,zone-b")
	table := writeTestFile(t, dir, "table.json", runShardwise(t, "regions", "new", "--nodes", "zone-a,zone-b"))
	runShardwise(t, "regions", "apply", "--endpoints", eps, "--force", table)

	names := []string{"zone-a", "zone-b"}
	nodes := make([]*zoneProcess, len(names))
	for i, name := range names {
		nodes[i] = &zoneProcess{name: name, p: startShardwise(t, "zone", "--endpoints", eps, "--name", name, "--certs", certs,
			"--module", "wander", "--entities", "200", "--tick", "20ms", "--ttl", "2s",
			"--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0")}
	}
	for _, n := range nodes {
		n.waitReady(t)
	}
	a, b := nodes[0], nodes[1]

	// Before: both tick, zone-a holds region 0's wanderers, zone-b none.
	const moved = `shardwise_zone_region_entities{region="0"}`
	var ma, mb metrics
	waitFor(t, 30*time.Second, "both nodes ticking", func() bool {
		ma, mb = a.scrape(t), b.scrape(t)
		return ma["shardwise_zone_tick"] >= 5 && mb["shardwise_zone_tick"] >= 5
	}, func() string { return dump(names, ma, mb) })
	n0 := ma[moved]
	simA, simB := ma[simulated], mb[simulated]
	t.Logf("before: region 0 holds %v wanderers on zone-a; zone-a simulates %v, zone-b %v", n0, simA, simB)
	if n0 == 0 || simA+simB != 200 {
		t.Fatalf("before the move: zone-a has %v entities in region 0, the nodes simulate %v + %v; want some, and 200 in all\n%s", n0, simA, simB, dump(names, ma, mb))
	}
	if _, ok := mb[moved]; ok {
		t.Fatalf("before the move zone-b simulates entities in zone-a's region 0\n%s", dump(names, ma, mb))
	}
	for _, m := range []metrics{ma, mb} {
		if h := m.handoffs(); h != (handoffCounts{}) {
			t.Fatalf("handoffs before the move (wanderers stay in their regions): %+v\n%s", h, dump(names, ma, mb))
		}
	}

	// The move, as the README does it: a table giving region 0 to zone-b,
	// applied over version 1. Both nodes are live members, so no --force.
	movedTable := writeTestFile(t, dir, "moved.json", runShardwise(t, "regions", "new", "--nodes", "zone-a,zone-b", "--set", "0=zone-b"))
	if out := runShardwise(t, "regions", "apply", "--endpoints", eps, "--expect-version", "1", movedTable); !strings.HasPrefix(out, "applied region table version 2:") {
		t.Fatalf("regions apply printed %q", out)
	}

	// After: poll until both hold version 2, zone-a has nothing left in
	// region 0 and nothing is frozen on either side, then check the counts.
	waitFor(t, 30*time.Second, "the handoff of region 0 to settle", func() bool {
		ma, mb = a.scrape(t), b.scrape(t)
		return ma["shardwise_zone_table_version"] == 2 && mb["shardwise_zone_table_version"] == 2 &&
			ma[moved] == 0 && ma[frozen] == 0 && mb[frozen] == 0
	}, func() string { return dump(names, ma, mb) })
	t.Logf("after: zone-b simulates %v in region 0; zone-a simulates %v, zone-b %v; handoffs zone-a %+v, zone-b %+v",
		mb[moved], ma[simulated], mb[simulated], ma.handoffs(), mb.handoffs())
	checks := []struct {
		what      string
		got, want float64
	}{
		{"zone-b's entities in region 0", mb[moved], n0},
		{"zone-a's entities simulated", ma[simulated], simA - n0},
		{"zone-b's entities simulated", mb[simulated], simB + n0},
		{"entities simulated in all", ma[simulated] + mb[simulated], simA + simB},
		{"zone-a's regions", ma["shardwise_zone_owned_regions"], 127},
		{"zone-b's regions", mb["shardwise_zone_owned_regions"], 129},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	n := int(n0)
	if h, want := ma.handoffs(), (handoffCounts{Sent: n, Acked: n}); h != want {
		t.Errorf("zone-a's handoffs: %+v, want %+v", h, want)
	}
	if h, want := mb.handoffs(), (handoffCounts{Adopted: n}); h != want {
		t.Errorf("zone-b's handoffs: %+v, want %+v", h, want)
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", dump(names, ma, mb))
	}

	// Both stop cleanly on an interrupt, with their summary.
	for _, n := range nodes {
		if err := n.p.stop(20 * time.Second); err != nil {
			t.Errorf("%s after the interrupt: %v", n.name, err)
		}
		if !strings.Contains(n.p.out.String(), n.name+": ran ") {
			t.Errorf("%s printed no summary", n.name)
		}
	}
}

const (
	simulated = `shardwise_zone_entities{state="simulated"}`
	frozen    = `shardwise_zone_entities{state="frozen"}`
)

// zoneProcess is one "shardwise zone" process and its metrics address.
type zoneProcess struct {
	name    string
	p       *shardwiseProcess
	metrics string // URL, from the ready line
}

// waitReady waits for the node's ready line, which names its metrics URL.
func (z *zoneProcess) waitReady(t *testing.T) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(z.name) + `: node \d+, link \S+, metrics (http://127\.0\.0\.1:\d+/metrics), `)
	waitFor(t, 30*time.Second, z.name+"'s ready line", func() bool {
		if m := re.FindStringSubmatch(z.p.out.String()); m != nil {
			z.metrics = m[1]
			return true
		}
		if z.p.exited() {
			t.Fatalf("%s exited before it was ready: %v\n%s", z.name, z.p.err, z.p.out.String())
		}
		return false
	}, z.p.out.String)
}

// metrics are one scrape: each sample's value by its series as the text
// format writes it (name{label="value",...}).
type metrics map[string]float64

// scrape reads the node's metrics endpoint. The parser knows only what
// client_golang writes: one sample per line, no timestamps.
func (z *zoneProcess) scrape(t *testing.T) metrics {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(z.metrics)
	if err != nil {
		if z.p.exited() {
			t.Fatalf("%s exited: %v\n%s", z.name, z.p.err, z.p.out.String())
		}
		t.Fatalf("%s: %v", z.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: GET %s: %s", z.name, z.metrics, resp.Status)
	}
	m := metrics{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("%s: a metrics line that is not name value: %q", z.name, line)
		}
		m[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: read metrics: %v", z.name, err)
	}
	return m
}

// handoffCounts are the shardwise_zone_handoffs_total series of a scrape.
type handoffCounts struct {
	Sent, Acked, Refused, Aborted, Adopted, Stale int
}

func (m metrics) handoffs() handoffCounts {
	get := func(event string) int {
		return int(m[`shardwise_zone_handoffs_total{event="`+event+`"}`])
	}
	return handoffCounts{get("sent"), get("acked"), get("refused"), get("aborted"), get("adopted"), get("stale")}
}

// dump lists the shardwise_zone series of each node's scrape, for a
// failure message.
func dump(names []string, ms ...metrics) string {
	var b strings.Builder
	for i, m := range ms {
		fmt.Fprintf(&b, "%s:\n", names[i])
		var keys []string
		for k := range m {
			if strings.HasPrefix(k, "shardwise_zone_") {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s %v\n", k, m[k])
		}
	}
	return b.String()
}

// waitFor polls cond, every 20 ms, until it holds; past limit it fails
// the test with what and describe's account of the last try. Each try of
// these conditions is an HTTP scrape of two processes or a look at their
// output, so it polls less often than testenv.PollUntil.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s:\n%s", limit, what, describe())
		}
		<-tick.C
	}
}

func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
