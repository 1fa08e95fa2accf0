package main

// Helpers of the end-to-end failover tests (failover_e2e_test.go,
// netns_e2e_test.go): the shardwise binary built once per test, real
// processes that a test can SIGKILL, and a census of every node's
// simulated entities read from each node's dashboard (snapshot.json).

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/dashboard"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonecli"
)

// e2eBinary is SHARDWISE_BIN (CI's static build; scripts/test builds one
// for the whole suite), or the command built from this checkout, once per
// test binary, into a directory TestMain removes. The processes run
// without the race detector, as an operator runs them: four of them under
// -race would not keep their tick on two cores.
func e2eBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("SHARDWISE_BIN"); bin != "" {
		return bin
	}
	b := &e2eBuilt
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "shardwise-e2e-"); b.err != nil {
			return
		}
		bin := filepath.Join(b.dir, "shardwise")
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		b.bin = bin
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// e2eBuilt is e2eBinary's one build for the tests of this binary: the
// build costs seconds of linking (minutes of compiling on a cold cache),
// and every end-to-end test runs the same command.
var e2eBuilt struct {
	once sync.Once
	dir  string // removed by TestMain after the tests
	bin  string
	err  error
}

// removeE2EBinary removes e2eBinary's build, if it made one.
func removeE2EBinary() {
	if e2eBuilt.dir != "" {
		_ = os.RemoveAll(e2eBuilt.dir)
	}
}

// e2eProc is one real process of an end-to-end test, its standard output
// and error in one buffer.
type e2eProc struct {
	name   string
	cmd    *exec.Cmd
	out    testenv.Buffer
	done   chan struct{} // closed once the process has exited
	err    error         // Wait's result, set before done closes
	exitAt time.Time     // when Wait returned, set before done closes
}

// startE2E starts argv (a program and its arguments) as the process
// called name. The test's cleanup interrupts it if it still runs, kills it
// 10 seconds later, and logs the end of its output.
func startE2E(t *testing.T, name string, argv ...string) *e2eProc {
	t.Helper()
	p := &e2eProc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		err := p.cmd.Wait()
		p.exitAt = time.Now()
		p.err = err
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				t.Errorf("%s: still running 10s after the interrupt: killed", name)
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
		out := p.out.String()
		if len(out) > 6000 && !t.Failed() {
			out = "…" + out[len(out)-6000:]
		}
		t.Logf("%s (%v):\n%s", name, p.err, out)
	})
	return p
}

func (p *e2eProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and returns the moment just before it.
func (p *e2eProc) kill(t *testing.T) time.Time {
	t.Helper()
	at := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", p.name, err)
	}
	return at
}

// waitLine polls the process's output until re matches, and returns the
// submatches; the process exiting first, or limit passing, fails the test.
func (p *e2eProc) waitLine(t *testing.T, re *regexp.Regexp, limit time.Duration) []string {
	t.Helper()
	var m []string
	testenv.PollUntil(t, limit, p.name+": "+re.String(), func() bool {
		if p.exited() {
			t.Fatalf("%s exited (%v) before %q:\n%s", p.name, p.err, re, p.out.String())
		}
		m = re.FindStringSubmatch(p.out.String())
		return m != nil
	})
	return m
}

// quadrantTable is the demo's first table (demo.applyTable with four
// nodes): each node a quadrant of the torus, the four meeting at the seams'
// crossing, in the middle of the players' start square.
func quadrantTable(t *testing.T, names []string) *cells.Table {
	t.Helper()
	grid, err := cells.NewGrid(game.Config{}.RuntimeConfig().Grid)
	if err != nil {
		t.Fatal(err)
	}
	owners := make([]string, grid.Regions())
	for r := range owners {
		col, row := grid.Coords(cells.RegionID(r))
		q := 0
		if col >= grid.Cols()/2 {
			q++
		}
		if row >= grid.Rows()/2 {
			q += 2
		}
		owners[r] = names[q]
	}
	tb, err := cells.NewTable(grid, 1, owners)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// nodeSample is one node's dashboard snapshot as the census keeps it.
type nodeSample struct {
	// At is when the read returned.
	At           time.Time
	Tick         uint64
	TableVersion uint64
	OwnedRegions int
	Handoff      zone.HandoffStats
	// Entities are the node's simulated entities at its last sample (the
	// dashboard samples every 250 ms), by id.
	Entities map[uint64]dashboard.Entity
}

// censusSnapshot is the part of a node's dashboard.Snapshot that
// readSample keeps; the decoder skips the rest (the region grid, the
// handoff and event logs, the tick percentiles) instead of building it:
// the census reads four dashboards ten times a second, and decoding whole
// snapshots was a tenth of this package's in-process CPU under -race.
type censusSnapshot struct {
	Nodes []struct {
		Tick         uint64            `json:"tick"`
		TableVersion uint64            `json:"tableVersion"`
		OwnedRegions int               `json:"ownedRegions"`
		Handoff      zone.HandoffStats `json:"handoff"`
	} `json:"nodes"`
	Entities []dashboard.Entity `json:"entities"`
}

// readSample reads a zone node's dashboard snapshot at base (its URL,
// ending in "/") with client.
func readSample(ctx context.Context, client *http.Client, base string) (nodeSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"snapshot.json", nil)
	if err != nil {
		return nodeSample{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nodeSample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nodeSample{}, fmt.Errorf("%s: %s", base, resp.Status)
	}
	var snap censusSnapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		return nodeSample{}, err
	}
	s := nodeSample{At: time.Now(), Entities: make(map[uint64]dashboard.Entity, len(snap.Entities))}
	if len(snap.Nodes) == 1 {
		n := snap.Nodes[0]
		s.Tick, s.TableVersion, s.OwnedRegions, s.Handoff = n.Tick, n.TableVersion, n.OwnedRegions, n.Handoff
	}
	for _, e := range snap.Entities {
		id, err := strconv.ParseUint(e.ID, 10, 64)
		if err != nil {
			return nodeSample{}, fmt.Errorf("%s: entity id %q: %w", base, e.ID, err)
		}
		s.Entities[id] = e
	}
	return s, nil
}

// census reads every node's dashboard each round and checks that no
// entity is simulated by two nodes. The nodes sample their entities every
// 250 ms, each at its own moment, so an entity handed over between two
// samples shows on both nodes for up to a sample's age: an id on two nodes
// is a duplicate (a failure) only when it stays on two nodes for
// dupPersist; shorter overlaps are counted as transient. A node whose
// tick has not moved for stillFor steps nothing, so writes nothing: its
// last sample (a node fenced and about to exit still serves it) does not
// count towards a duplicate.
type census struct {
	client  *http.Client
	clients map[string]*http.Client // a node's own client (its namespace's), else client

	mu       sync.Mutex
	urls     map[string]string // node → dashboard URL; a node removed is no longer read
	last     map[string]nodeSample
	trail    map[uint64][]trailPoint // players' masters: where each stood, round by round
	dupFrom  map[uint64]time.Time    // ids on two nodes now, since when
	tickOf   map[string]uint64       // node → the tick of its last sample
	tickAt   map[string]time.Time    // node → when that tick was first read
	reported map[uint64]bool         // ids in persistent
	// transient counts overlaps shorter than dupPersist; persistent names
	// the duplicates.
	transient  int
	persistent []string
}

// trailPoint is where a player's master stood at a node's sample, read at
// At.
type trailPoint struct {
	At   time.Time
	Node string
	X, Y float64
}

const dupPersist = time.Second

// stillFor is how long a node's sampled tick must stand still for the
// census to take it as stepping nothing: more than two of the
// dashboard's 250 ms samples, so a live node always moves within it.
const stillFor = 600 * time.Millisecond

// newCensus reads the dashboards at urls (node → URL), each with its
// node's client in clients if it has one, else with a plain client.
func newCensus(urls map[string]string, clients map[string]*http.Client) *census {
	return &census{client: &http.Client{}, clients: clients, urls: urls, last: map[string]nodeSample{},
		trail: map[uint64][]trailPoint{}, dupFrom: map[uint64]time.Time{}, reported: map[uint64]bool{},
		tickOf: map[string]uint64{}, tickAt: map[string]time.Time{}}
}

// drop stops reading node (killed, or cut off).
func (c *census) drop(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.urls, node)
	delete(c.last, node)
}

// round reads every node once; a node that does not answer keeps its last
// sample out of the round.
func (c *census) round(ctx context.Context) {
	c.mu.Lock()
	urls := make(map[string]string, len(c.urls))
	for n, u := range c.urls {
		urls[n] = u
	}
	clients := c.clients
	c.mu.Unlock()
	got := map[string]nodeSample{}
	for n, u := range urls {
		cl := c.client
		if clients[n] != nil {
			cl = clients[n]
		}
		if s, err := readSample(ctx, cl, u); err == nil {
			got[n] = s
		}
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	on := map[uint64][]string{}
	for n, s := range got {
		if _, still := c.urls[n]; !still {
			continue
		}
		c.last[n] = s
		if t, ok := c.tickOf[n]; !ok || t != s.Tick {
			c.tickOf[n], c.tickAt[n] = s.Tick, now
		}
		stepping := now.Sub(c.tickAt[n]) < stillFor
		for id, e := range s.Entities {
			if stepping {
				on[id] = append(on[id], n)
			}
			if e.Kind == game.KindNamePlayer {
				tr := c.trail[id]
				if len(tr) == 0 || tr[len(tr)-1].X != e.X || tr[len(tr)-1].Y != e.Y || tr[len(tr)-1].Node != n {
					c.trail[id] = append(tr, trailPoint{At: s.At, Node: n, X: e.X, Y: e.Y})
				}
			}
		}
	}
	for id, nodes := range on {
		if len(nodes) < 2 {
			continue
		}
		slices.Sort(nodes)
		if _, ok := c.dupFrom[id]; !ok {
			c.dupFrom[id] = now
		}
		if now.Sub(c.dupFrom[id]) >= dupPersist && !c.reported[id] {
			c.reported[id] = true
			c.persistent = append(c.persistent, fmt.Sprintf("%d on %s for %v", id, strings.Join(nodes, " and "), now.Sub(c.dupFrom[id]).Round(time.Millisecond)))
		}
	}
	for id := range c.dupFrom {
		if len(on[id]) < 2 {
			c.transient++
			delete(c.dupFrom, id)
		}
	}
}

// run reads rounds every period until ctx ends.
func (c *census) run(ctx context.Context, period time.Duration) {
	tk := time.NewTicker(period)
	defer tk.Stop()
	for {
		c.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// snapshot returns the last sample of every node read.
func (c *census) snapshot() map[string]nodeSample {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]nodeSample, len(c.last))
	for n, s := range c.last {
		out[n] = s
	}
	return out
}

// duplicates returns the transient overlaps and the persistent duplicates.
func (c *census) duplicates() (transient int, persistent []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.transient, slices.Clone(c.persistent)
}

// trailOf returns where player master id stood, in order.
func (c *census) trailOf(id uint64) []trailPoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.trail[id])
}

// startCensus runs c every period until the test ends.
func startCensus(t *testing.T, c *census, period time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.run(ctx, period)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// rollback estimates how much of a player's walk a failover undid: the
// time between the kill and the latest moment before it at which the
// player's master stood where it was first seen after (within 0.5 m, the
// nearest trail point otherwise), so at most the kill's age of the last
// sample too much. ok is false when the player was not seen both before
// and after.
func rollback(trail []trailPoint, kill time.Time, victim string) (lost time.Duration, moved float64, ok bool) {
	var before []trailPoint
	var after *trailPoint
	for i := range trail {
		p := trail[i]
		if p.At.Before(kill) {
			before = append(before, p)
		} else if p.Node != victim && after == nil {
			after = &trail[i]
		}
	}
	if len(before) == 0 || after == nil {
		return 0, 0, false
	}
	last := before[len(before)-1]
	best, bestD := last, -1.0
	for i := len(before) - 1; i >= 0; i-- {
		d := dist(before[i], *after)
		if bestD < 0 || d < bestD {
			best, bestD = before[i], d
		}
		if d < 0.5 {
			break
		}
	}
	return kill.Sub(best.At), dist(last, *after), true
}

func dist(a, b trailPoint) float64 {
	dx, dy := a.X-b.X, a.Y-b.Y
	return math.Hypot(dx, dy)
}

// durationEnv is the duration in environment variable name, or def.
func durationEnv(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// startSimBots starts count sim bots (accounts 1 to count) on gateways,
// with login tokens signed by the key in keyFile: each walks legs across
// the borders around the start square (80 m out), fights the mobs it
// meets and, one leg in three, trades with its partner; a bot whose socket
// closes logs in again on the next gateway. They stop at the test's end if
// not before. Each of adjust may change their configuration.
func startSimBots(t *testing.T, gateways []string, keyFile string, count int, adjust ...func(*sim.BotsConfig)) *sim.Bots {
	t.Helper()
	key, err := readLoginKey("--key", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: zonecli.DefaultCluster, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.BotsConfig{
		Gateways: gateways, Count: count, Seed: 30, Reach: 80, RelogChance: -1, TradeChance: 0.3,
		LoginRetries: 30, RetryWait: 500 * time.Millisecond,
		Token: func(a account.ID) (string, error) {
			tok, _, err := iss.Issue(a, gateway.Audience)
			return tok, err
		},
	}
	for _, f := range adjust {
		f(&cfg)
	}
	bots, err := sim.StartBots(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = bots.Stop() })
	return bots
}

// waitBots waits up to a minute for every bot to log in; on a loaded
// machine some may still be retrying then: the play goes on if at least
// half are in (their count is logged), else the test fails.
func waitBots(t *testing.T, bots *sim.Bots, count int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for bots.Stats().Logins < count && time.Now().Before(deadline) {
		<-time.After(50 * time.Millisecond) // polling the bots' counters
	}
	st := bots.Stats()
	if st.Logins < count {
		t.Logf("after a minute %d of %d bots logged in (login failures %d, errors %v, closes %v): playing on",
			st.Logins, count, st.LoginFailures, st.Errors, st.Closes)
	}
	if st.Logins < (count+1)/2 {
		t.Fatalf("only %d of %d bots logged in within a minute", st.Logins, count)
	}
}
