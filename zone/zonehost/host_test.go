package zonehost_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/worldstore/sqlworld"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonehost"
)

// hostGrid is an 8 km torus in 2 km regions; split over two nodes in
// bands of rows, the nodes meet along y = 4096 and across the Y seam.
func hostGrid() cells.GridConfig {
	g := cells.GridConfig{RegionEdge: 2048}
	g.World.Width, g.World.Height = 8192, 8192
	return g.WithDefaults()
}

// hostEtcd starts an etcd member for one test: zone's internal tests
// share one from their TestMain, which an external test file cannot see.
func hostEtcd(t *testing.T) *coord.Embedded {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	e, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{
		DataDir: t.TempDir(), Heartbeat: 50 * time.Millisecond, Election: 500 * time.Millisecond, UnsafeNoFsync: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// applyTable stores t under prefix with an operator's client (forced: the
// nodes it names need not be live yet).
func applyTable(t *testing.T, e *coord.Embedded, prefix string, table *cells.Table) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	op, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: e.Endpoints(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	if err := op.ApplyRegions(ctx, table, coord.ApplyOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
}

// hostRun is one Host running in its own goroutine, with its reports.
type hostRun struct {
	name string
	done chan error

	mu    sync.Mutex
	ready zonehost.HostReady
	last  zonehost.HostReport
	ticks int
	ended bool  // Host returned (its error also went to done)
	err   error // what it returned
}

// exited reports whether Host returned, and with what, without taking
// the result from done.
func (h *hostRun) exited() (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ended, h.err
}

func (h *hostRun) report() (zonehost.HostReport, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last, h.ticks
}

func startHost(ctx context.Context, cfg zonehost.HostConfig) *hostRun {
	h := &hostRun{name: cfg.Name, done: make(chan error, 1)}
	cfg.OnReady = func(r zonehost.HostReady) {
		h.mu.Lock()
		h.ready = r
		h.mu.Unlock()
	}
	cfg.OnTick = func(r zonehost.HostReport) {
		h.mu.Lock()
		h.last, h.ticks = r, h.ticks+1
		h.mu.Unlock()
	}
	go func() {
		err := zonehost.Host(ctx, cfg)
		h.mu.Lock()
		h.ended, h.err = true, err
		h.mu.Unlock()
		h.done <- err
	}()
	return h
}

// TestHostsRunOneWorld: two hosts, each a whole node (coord membership,
// link from a certificate directory, runtime), against one etcd and
// splitting the world by the region table, find each other through coord
// and each comes to hold the other's entities as render ghosts.
// Cancelling their context returns nil and stops everything they
// started.
func TestHostsRunOneWorld(t *testing.T) {
	e := hostEtcd(t)
	prefix := fmt.Sprintf("/hosttest/%d/", time.Now().UnixNano())
	names := []string{"zone-a", "zone-b"}
	grid, err := cells.NewGrid(hostGrid())
	if err != nil {
		t.Fatal(err)
	}
	table, err := cells.Uniform(grid, 1, names)
	if err != nil {
		t.Fatal(err)
	}
	applyTable(t, e, prefix, table)
	certs := t.TempDir() + "/certs"
	if err := link.WriteClusterCerts(certs, "hosttest", names, time.Now().Add(-time.Hour), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()

	// One fake clock paces both nodes: each tick the test waits until both
	// have armed their timer (they have finished the tick before), then
	// moves it one interval, so the nodes tick in lockstep.
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var hosts []*hostRun
	for _, name := range names {
		mod, err := wander.New(wander.Config{Seed: 7, Entities: 240, Accounts: 24, Area: 700})
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, startHost(ctx, zonehost.HostConfig{
			Coord:   coord.ClientConfig{Endpoints: e.Endpoints(), Prefix: prefix},
			Name:    name,
			CertDir: certs,
			TTL:     2 * time.Second,
			Module:  mod,
			Runtime: zone.Config{Grid: hostGrid()},
			Clock:   fake,
			// The peer wait is measured on the fake clock, which this
			// test moves much faster than the link connects: wait until
			// the peers are connected, however many polls it takes.
			PeerWait: time.Hour,
		}))
	}

	const interval = 50 * time.Millisecond // the runtime's default step
	deadline := time.Now().Add(30 * time.Second)
	seen := func() bool {
		for _, h := range hosts {
			if r, n := h.report(); n < 20 || r.RenderGhosts == 0 {
				return false
			}
		}
		return true
	}
	for !seen() {
		bctx, bcancel := context.WithDeadline(ctx, deadline)
		err := fake.BlockUntil(bctx, len(hosts))
		bcancel()
		if err != nil {
			for _, h := range hosts {
				select {
				case err := <-h.done:
					t.Fatalf("%s stopped: %v", h.name, err)
				default:
				}
				r, n := h.report()
				t.Logf("%s: %d ticks, last %+v", h.name, n, r)
			}
			t.Fatal("the hosts never both held render ghosts of each other")
		}
		fake.Advance(interval)
	}
	for _, h := range hosts {
		r, n := h.report()
		h.mu.Lock()
		ready := h.ready
		h.mu.Unlock()
		t.Logf("%s: node %d, owns %d of %d regions, connected %v; after %d ticks: %d entities, %d render ghosts, %d batches",
			h.name, ready.Node, ready.OwnedRegions, ready.Regions, ready.Connected, n, r.Entities, r.RenderGhosts, r.Cluster.Batches)
		if len(ready.Missing) > 0 || len(ready.Connected) != 1 {
			t.Errorf("%s started with peers connected %v, missing %v", h.name, ready.Connected, ready.Missing)
		}
		if r.OwnedRegions != grid.Regions()/2 || r.TableVersion != 1 {
			t.Errorf("%s owns %d regions at table version %d, want %d at version 1", h.name, r.OwnedRegions, r.TableVersion, grid.Regions()/2)
		}
		if r.Cluster.Refused != 0 {
			t.Errorf("%s refused %d messages from a live peer", h.name, r.Cluster.Refused)
		}
	}

	cancel()
	for _, h := range hosts {
		select {
		case err := <-h.done:
			if err != nil {
				t.Errorf("%s: Host after cancel = %v, want nil", h.name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: Host did not return after cancel", h.name)
		}
	}
	// Everything the hosts started has stopped: the goroutine count comes
	// back (goroutines ending after Host returned would be ones it did not
	// join; gRPC's own take a moment to unwind, hence the poll).
	testenv.PollUntil(t, 10*time.Second, "the hosts' goroutines to end", func() bool {
		return runtime.NumGoroutine() <= before
	})
}

// soloHost prepares one node "zone-a" alone in its table: an etcd, a key
// prefix holding the table, its certificates and a module of 16
// wanderers.
func soloHost(t *testing.T) (e *coord.Embedded, prefix, certs string, mod zone.Module) {
	t.Helper()
	e = hostEtcd(t)
	prefix = fmt.Sprintf("/hosttest/%d/", time.Now().UnixNano())
	grid, err := cells.NewGrid(hostGrid())
	if err != nil {
		t.Fatal(err)
	}
	table, err := cells.Uniform(grid, 1, []string{"zone-a"})
	if err != nil {
		t.Fatal(err)
	}
	applyTable(t, e, prefix, table)
	certs = t.TempDir() + "/certs"
	if err := link.WriteClusterCerts(certs, "hosttest", []string{"zone-a"}, time.Now().Add(-time.Hour), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	m, err := wander.New(wander.Config{Seed: 7, Entities: 16})
	if err != nil {
		t.Fatal(err)
	}
	return e, prefix, certs, m
}

// TestHostStopsAfterTicks: with Ticks set, Host runs exactly that many
// ticks and returns nil; a node alone in the table does not wait for
// peers.
func TestHostStopsAfterTicks(t *testing.T) {
	e, prefix, certs, mod := soloHost(t)
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := startHost(t.Context(), zonehost.HostConfig{
		Coord: coord.ClientConfig{Endpoints: e.Endpoints(), Prefix: prefix},
		Name:  "zone-a", CertDir: certs, Module: mod, Runtime: zone.Config{Grid: hostGrid()},
		Ticks: 5, Clock: fake,
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for range 5 {
		if err := fake.BlockUntil(ctx, 1); err != nil {
			t.Fatal("the host never armed its tick timer")
		}
		fake.Advance(50 * time.Millisecond)
	}
	select {
	case err := <-h.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Host did not return after its 5 ticks")
	}
	if r, n := h.report(); n != 5 || r.Tick != 5 || r.Entities != 16 || r.Simulated != 16 || r.Frozen != 0 {
		t.Fatalf("ran %d ticks, last tick %d with %d entities (%d simulated, %d frozen); want 5 ticks and 16 entities, all simulated",
			n, r.Tick, r.Entities, r.Simulated, r.Frozen)
	}
}

// TestHostServesMetrics: with MetricsAddr the host serves, from before its
// first tick until it returns, the node's metrics as they stand after its
// last tick, and publishes their address in coord.
func TestHostServesMetrics(t *testing.T) {
	e, prefix, certs, mod := soloHost(t)
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h := startHost(ctx, zonehost.HostConfig{
		Coord: coord.ClientConfig{Endpoints: e.Endpoints(), Prefix: prefix},
		Name:  "zone-a", CertDir: certs, Module: mod, Runtime: zone.Config{Grid: hostGrid()},
		MetricsAddr: "127.0.0.1:0", Clock: fake,
	})
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	const ticks = 3
	for range ticks {
		if err := fake.BlockUntil(wctx, 1); err != nil {
			t.Fatal("the host never armed its tick timer")
		}
		fake.Advance(50 * time.Millisecond)
	}
	// OnTick runs after the metrics are set: once it has seen the last
	// tick, a scrape shows that tick.
	testenv.PollUntil(t, 30*time.Second, "the host's third tick", func() bool {
		_, n := h.report()
		return n == ticks
	})
	h.mu.Lock()
	addr := h.ready.MetricsAddr
	h.mu.Unlock()
	if addr == "" || !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("HostReady.MetricsAddr = %q, want the port served on 127.0.0.1", addr)
	}
	body := scrapeMetrics(t, "http://"+addr+"/metrics")
	regionSum := 0.0
	for series, v := range body {
		if strings.HasPrefix(series, "shardwise_zone_region_entities{") {
			regionSum += v
		}
	}
	want := map[string]float64{
		"shardwise_zone_tick":                            ticks,
		`shardwise_zone_entities{state="simulated"}`:     16,
		`shardwise_zone_entities{state="frozen"}`:        0,
		`shardwise_zone_handoffs_total{event="sent"}`:    0,
		`shardwise_zone_handoffs_total{event="adopted"}`: 0,
		"shardwise_zone_render_ghosts":                   0,
		"shardwise_zone_owned_regions":                   16,
		"shardwise_zone_table_version":                   1,
		"shardwise_zone_fenced":                          0,
	}
	if regionSum != 16 {
		t.Errorf("shardwise_zone_region_entities sum to %v, want the 16 wanderers", regionSum)
	}
	for series, v := range want {
		if got, ok := body[series]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, v)
		}
	}
	if _, ok := body["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}

	cl, err := coord.Connect(wctx, coord.ClientConfig{Endpoints: e.Endpoints(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ms, err := cl.Members(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Addrs["metrics"] != addr {
		t.Errorf("members %+v, want zone-a publishing metrics at %s", ms, addr)
	}

	cancel()
	select {
	case err := <-h.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Host did not return after cancel")
	}
	// Host returned: nothing serves the address any more.
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Errorf("%s still accepts connections after Host returned", addr)
	}
}

// scrapeMetrics reads a Prometheus text endpoint into value by series
// (name{labels} as written).
func scrapeMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("metrics line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestHostReturnsFencedWhenCutOff: a node cut off from etcd loses its
// lease; Host returns an error matching zone.ErrFenced, without waiting
// for a tick.
func TestHostReturnsFencedWhenCutOff(t *testing.T) {
	e, prefix, certs, mod := soloHost(t)
	proxy := testenv.StartTCPProxy(t, e.Endpoints()[0])
	// A fake clock nobody moves: no tick runs, so the fence must reach
	// the loop through the Ownership's channel.
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- zonehost.Host(t.Context(), zonehost.HostConfig{
			Coord: coord.ClientConfig{Endpoints: []string{proxy.Endpoint()}, Prefix: prefix, DialTimeout: time.Second},
			Name:  "zone-a", CertDir: certs, TTL: time.Second, Module: mod, Runtime: zone.Config{Grid: hostGrid()},
			Clock: fake, OnReady: func(zonehost.HostReady) { close(ready) },
		})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Host returned before ticking: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Host never became ready")
	}
	cutAt := time.Now()
	proxy.Cut()
	select {
	case err := <-done:
		if !errors.Is(err, zone.ErrFenced) || errcode.Of(err) != zone.CodeFenced {
			t.Fatalf("Host = %v, want an error matching zone.ErrFenced", err)
		}
		t.Logf("Host returned %v after the cut: %v", time.Since(cutAt), err)
	case <-time.After(30 * time.Second):
		t.Fatal("Host still running 30s after its etcd was cut off (TTL 1s)")
	}
}

// TestHostConfigValidateNamesTheField: each refused configuration names
// the field as a Go caller writes it, and Host refuses it before any I/O.
func TestHostConfigValidateNamesTheField(t *testing.T) {
	mod, err := wander.New(wander.Config{})
	if err != nil {
		t.Fatal(err)
	}
	good := zonehost.HostConfig{
		Coord: coord.ClientConfig{Endpoints: []string{"http://127.0.0.1:1"}},
		Name:  "zone-a", CertDir: "certs", Module: mod,
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("a good configuration is refused: %v", err)
	}
	gw := func(c *zonehost.HostConfig) {
		c.GatewayAddr, c.Cluster, c.LoginKeys = "127.0.0.1:0", "c", []ed25519.PublicKey{make(ed25519.PublicKey, 32)}
		c.DirectoryURL, c.WorldStoreURL = "redis://127.0.0.1:6379/0", "sqlite:///tmp/world.db"
	}
	withGateway := good
	gw(&withGateway)
	if err := withGateway.Validate(); err != nil {
		t.Fatalf("a good configuration with a gateway is refused: %v", err)
	}
	cases := []struct {
		field string
		edit  func(c *zonehost.HostConfig)
	}{
		{"HostConfig.Coord.Endpoints", func(c *zonehost.HostConfig) { c.Coord.Endpoints = nil }},
		{"HostConfig.Coord.Prefix", func(c *zonehost.HostConfig) { c.Coord.Prefix = "nope" }},
		{"HostConfig.Name", func(c *zonehost.HostConfig) { c.Name = "" }},
		{"HostConfig.Name", func(c *zonehost.HostConfig) { c.Name = "Zone A" }},
		{"HostConfig.CertDir", func(c *zonehost.HostConfig) { c.CertDir = "" }},
		{"HostConfig.ListenAddr", func(c *zonehost.HostConfig) { c.ListenAddr = "7100" }},
		{"HostConfig.AdvertiseAddr", func(c *zonehost.HostConfig) { c.AdvertiseAddr = "10.0.0.5:0" }},
		{"HostConfig.MetricsAddr", func(c *zonehost.HostConfig) { c.MetricsAddr = "9100" }},
		{"HostConfig.TTL", func(c *zonehost.HostConfig) { c.TTL = 1500 * time.Millisecond }},
		{"HostConfig.Module", func(c *zonehost.HostConfig) { c.Module = nil }},
		{"HostConfig.Runtime.Name", func(c *zonehost.HostConfig) { c.Runtime.Name = "zone-b" }},
		{"HostConfig.Runtime.Node", func(c *zonehost.HostConfig) { c.Runtime.Node = 3 }},
		{"HostConfig.Runtime.Lease", func(c *zonehost.HostConfig) { c.Runtime.Lease = 9 }},
		{"HostConfig.Runtime.Accept", func(c *zonehost.HostConfig) { c.Runtime.Accept = func(string, int64) bool { return true } }},
		{"HostConfig.Runtime.TickInterval", func(c *zonehost.HostConfig) { c.Runtime.TickInterval = -time.Millisecond }},
		{"HostConfig.Runtime.WorldStore", func(c *zonehost.HostConfig) { c.Runtime.WorldStore = worldstore.NewMemory(nil) }},
		{"HostConfig.Cluster", func(c *zonehost.HostConfig) { c.Cluster = "c" }},
		{"HostConfig.LoginKeys", func(c *zonehost.HostConfig) { c.LoginKeys = []ed25519.PublicKey{make(ed25519.PublicKey, 32)} }},
		{"HostConfig.DirectoryURL", func(c *zonehost.HostConfig) { c.DirectoryURL = "redis://x" }},
		{"HostConfig.WorldStoreURL", func(c *zonehost.HostConfig) { c.WorldStoreURL = "sqlite:///x" }},
		{"HostConfig.GatewayAddr", func(c *zonehost.HostConfig) { gw(c); c.GatewayAddr = "8080" }},
		{"HostConfig.Cluster", func(c *zonehost.HostConfig) { gw(c); c.Cluster = "" }},
		{"HostConfig.LoginKeys", func(c *zonehost.HostConfig) { gw(c); c.LoginKeys = nil }},
		{"HostConfig.LoginKeys", func(c *zonehost.HostConfig) { gw(c); c.LoginKeys = []ed25519.PublicKey{{1, 2}} }},
		{"HostConfig.DirectoryURL", func(c *zonehost.HostConfig) { gw(c); c.DirectoryURL = "valkey:/x" }},
		{"HostConfig.WorldStoreURL", func(c *zonehost.HostConfig) { gw(c); c.WorldStoreURL = "mysql://x" }},
		{"HostConfig.Directory", func(c *zonehost.HostConfig) { c.Directory = sharedDir(t) }},
		{"HostConfig.WorldStore", func(c *zonehost.HostConfig) { c.WorldStore = worldstore.NewMemory(nil) }},
		{"HostConfig.Directory", func(c *zonehost.HostConfig) { gw(c); c.Directory = sharedDir(t) }},
		{"HostConfig.WorldStore", func(c *zonehost.HostConfig) { gw(c); c.WorldStore = worldstore.NewMemory(nil) }},
		{"HostConfig.GatewayLimits", func(c *zonehost.HostConfig) { c.GatewayLimits.MaxConnsPerAddr = 4 }},
		{"HostConfig.GatewayLimits.HTTPIdleTimeout", func(c *zonehost.HostConfig) { gw(c); c.GatewayLimits.HTTPIdleTimeout = time.Millisecond }},
		{"HostConfig.GatewayLimits.IdleTimeout", func(c *zonehost.HostConfig) { gw(c); c.GatewayLimits.IdleTimeout = time.Millisecond }},
		{"HostConfig.GatewayResumeWindow", func(c *zonehost.HostConfig) { c.GatewayResumeWindow = time.Minute }},
		{"HostConfig.GatewayResumeWindow", func(c *zonehost.HostConfig) { gw(c); c.GatewayResumeWindow = 10 * time.Millisecond }},
	}
	for _, c := range cases {
		cfg := good
		c.edit(&cfg)
		err := cfg.Validate()
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: Validate = %v, want a config error on %s", c.field, err, c.field)
			continue
		}
		if herr := zonehost.Host(t.Context(), cfg); herr == nil || herr.Error() != err.Error() {
			t.Errorf("%s: Host = %v, want Validate's %v", c.field, herr, err)
		}
	}
}

// gatewayHost prepares one node "zone-a" of the reference game (no bot
// players) for a gateway: an etcd, a prefix holding a table of the nodes
// names (zone-a first), zone-a's certificates, a login key pair and a
// base configuration with the gateway on a free port.
func gatewayHost(t *testing.T, nodes ...string) (zonehost.HostConfig, *logintoken.Issuer) {
	t.Helper()
	e := hostEtcd(t)
	prefix := fmt.Sprintf("/hosttest/%d/", time.Now().UnixNano())
	grid, err := cells.NewGrid(hostGrid())
	if err != nil {
		t.Fatal(err)
	}
	table, err := cells.Uniform(grid, 1, nodes)
	if err != nil {
		t.Fatal(err)
	}
	applyTable(t, e, prefix, table)
	certs := t.TempDir() + "/certs"
	if err := link.WriteClusterCerts(certs, "hosttest", nodes[:1], time.Now().Add(-time.Hour), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	gc := game.Config{Seed: 9, NoBots: true, Torus: hostGrid().World, RegionEdge: hostGrid().RegionEdge}
	mod, err := game.NewModule(gc)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: "hosttest", Key: priv})
	if err != nil {
		t.Fatal(err)
	}
	return zonehost.HostConfig{
		Coord: coord.ClientConfig{Endpoints: e.Endpoints(), Prefix: prefix},
		Name:  nodes[0], CertDir: certs, Module: mod, Runtime: gc.RuntimeConfig(),
		GatewayAddr: "127.0.0.1:0", Cluster: "hosttest", LoginKeys: []ed25519.PublicKey{pub},
	}, iss
}

// TestHostServesPlayers: with GatewayAddr the node serves the client
// protocol at /ws and the browser client at /, publishes the address in
// coord, and a client logs in, walks, and is saved in the world store
// when the node stops (its socket told GATEWAY.SHUTDOWN).
func TestHostServesPlayers(t *testing.T) {
	cfg, iss := gatewayHost(t, "zone-a")
	db := "sqlite://" + t.TempDir() + "/world.db"
	cfg.WorldStoreURL = db
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h := startHost(ctx, cfg)
	var addr string
	testenv.PollUntil(t, 30*time.Second, "the host's ready line", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		addr = h.ready.GatewayAddr
		return addr != ""
	})
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()

	cl, err := coord.Connect(wctx, cfg.Coord)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if ms, err := cl.Members(wctx); err != nil || len(ms) != 1 || ms[0].Addrs["gateway"] != addr {
		t.Errorf("members %+v (%v), want zone-a publishing its gateway at %s", ms, err, addr)
	}

	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "<canvas") {
		t.Errorf("GET / = %d, %.80q: want the browser client's page", resp.StatusCode, page)
	}

	tok, _, err := iss.Issue(77, gateway.Audience)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.Dial(wctx, "ws://"+addr+"/ws")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := c.Login(wctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if w.Gateway != "zone-a" || w.Account != 77 {
		t.Fatalf("welcome %+v", w)
	}
	var master uint64
	var at torus.Pos
	if err := c.Wait(wctx, func(v *sim.View) bool {
		master, _ = v.You()
		p, ok := v.Position(master)
		at = p
		return ok
	}); err != nil {
		t.Fatalf("the player never appeared: %v", err)
	}
	geo, err := torus.New(hostGrid().World)
	if err != nil {
		t.Fatal(err)
	}
	dest := geo.Translate(at, torus.Pos{X: 4})
	if _, err := c.Move(wctx, master, dest.X, dest.Y); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(wctx, func(v *sim.View) bool {
		p, ok := v.Position(master)
		return ok && geo.Within(p, dest, 0.5)
	}); err != nil {
		t.Fatalf("the walk never arrived: %v", err)
	}

	cancel()
	select {
	case err := <-h.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Host did not return after cancel")
	}
	<-c.Done()
	if code, reason, _ := c.Closed(); code != gateway.StatusShutdown || reason != gateway.CodeShutdown {
		t.Errorf("the socket closed %d %q, want the node stopping", code, reason)
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = conn.Close()
		t.Errorf("%s still accepts connections after Host returned", addr)
	}
	st, err := sqlworld.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := st.LoadPlayer(t.Context(), 77)
	if err != nil || !geo.Within(p.Pos, dest, 0.5) {
		t.Fatalf("saved %+v (%v), want the player where it stopped, %v", p, err, dest)
	}
}

// TestHostRefusesUnsharedStoresWithPeers: a gateway on a node whose table
// names another node needs the shared directory and world store; without
// them Host refuses to start, naming the field and the other node.
func TestHostRefusesUnsharedStoresWithPeers(t *testing.T) {
	cfg, _ := gatewayHost(t, "zone-a", "zone-b")
	refuses := func(t *testing.T, cfg zonehost.HostConfig, field string) {
		t.Helper()
		err := zonehost.Host(t.Context(), cfg)
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != field || !strings.Contains(ce.Reason, "zone-b") {
			t.Errorf("Host = %v, want a config error on %s naming zone-b", err, field)
		}
	}
	refuses(t, cfg, "HostConfig.DirectoryURL")
	t.Run("shared directory", func(t *testing.T) {
		cfg := cfg
		cfg.DirectoryURL = "redis://" + testenv.StartRedis(t).Addr
		refuses(t, cfg, "HostConfig.WorldStoreURL")
	})
}

// sharedDir is an in-process directory, as HostConfig.Directory takes.
func sharedDir(t *testing.T) zonehost.SharedDirectory {
	t.Helper()
	d, err := directory.NewMemory(directory.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
