//go:build linux

package sim_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// The gateway benchmarks of issue 15 (docs/bench/gateway.md, written by
// scripts/bench-gateway). Both run only with -bench.

// clientProcessEnv, set to "1", makes the test binary the client side of
// BenchmarkGatewayClients instead of running tests: the benchmark runs
// its own binary again with it, so that the clients' CPU is another
// process's and the server's getrusage counts the server alone.
const clientProcessEnv = "SHARDWISE_SIM_BENCH_CLIENTS"

func TestMain(m *testing.M) {
	if os.Getenv(clientProcessEnv) == "1" {
		if err := clientProcess(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "sim bench clients:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// threadCPU is the CPU time of the calling thread
// (clock_gettime(CLOCK_THREAD_CPUTIME_ID); getrusage's RUSAGE_THREAD
// counts in scheduler ticks): with the world goroutine locked to its
// thread, the CPU the tick used, whatever else the shared cores ran.
func threadCPU() time.Duration {
	const clockThreadCPUTimeID = 3 // CLOCK_THREAD_CPUTIME_ID; the syscall package does not name it
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// processCPU is this process's user+system time (every thread, GC
// included).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Flags of BenchmarkGatewayClients (go test -args, or sim.test directly).
var (
	fullClients = flag.Bool("sim.full-clients", false,
		"BenchmarkGatewayClients: full sim.Clients, which keep every entity they are shown, instead of lean ones")
	windowProfile = flag.String("sim.window-cpuprofile", "",
		"BenchmarkGatewayClients: write a CPU profile of each case's measured window (the server process) to this file, suffixed with the case's name")
	clientProfile = flag.String("sim.client-cpuprofile", "",
		"BenchmarkGatewayClients: write a CPU profile of the client process over each sockets case's measured window to this file, suffixed with the case's name")
)

// benchLimits: the benchmarks' gateways keep idle clients for long: a
// client that logged in early waits for the others before it sends its
// first input.
var benchLimits = gateway.Limits{IdleTimeout: 10 * time.Minute}

// ---- BenchmarkGatewayClients ----

// gatewayWorld is the world of BenchmarkGatewayClients for n players: the
// reference game as game.BenchmarkWorld builds it (every mob always
// moving), on the same 4 km square, with dens of 10 mobs: around 1,000
// players the dens within their stock radius hold about 20,000 mobs.
// Fewer players stock fewer dens (they cover less of the square).
func gatewayWorld(n int) game.Config {
	return game.Config{
		Seed:              1,
		Players:           n, // the bots of the baseline; with NoBots, the party grouping of the clients' accounts
		Area:              4000,
		DenChance:         0.11,
		DenCapacity:       10,
		WanderChance:      1,
		MaterialiseBudget: 100_000,
	}
}

// The schedule of BenchmarkGatewayClients, in ticks of 50 ms.
const (
	gatewayWarmTicks  = 300  // after the logins: the dens stock (one mob a second each)
	gatewayLoginTicks = 6000 // the most the logins may take (5 minutes)
	clientMoveEvery   = time.Second
	clientRoam        = 150.0 // metres around home, as the game's bots roam (game.Config.Roam)
)

// BenchmarkGatewayClients is the first benchmark of issue 15: one zone
// node (a solo runtime) running the reference game at a real 20 Hz (a
// ticker paces the ticks, as a host does) with about 20,000 mobs around N
// players, N = 250, 500 and 1,000, two ways side by side:
//
//   - sinks: the baseline, the game's own bots (master and pet each,
//     walking to waypoints around home and hitting mobs in reach) with
//     every account attached to an in-process sink that drops its batch:
//     no sockets, no gateway;
//   - sockets: the same world with no bots; N sim clients log in to a real
//     gateway over loopback WebSocket and each sends a move to a random
//     point within 150 m of its home about once a second. The clients
//     are lean (sim.DialOptions.Lean: they read every message and check
//     and count every frame, but keep only their own master and pet;
//     -sim.full-clients makes them keep the world they see). They run in
//     another process (this test binary again, clientProcessEnv), so this
//     process's CPU is the server's alone; the two processes share the
//     machine's cores.
//
// The accounts are the same (1 to N, so the same homes and parties). One
// op is one tick after the logins and a warm-up of gatewayWarmTicks.
// Reported: tick wall time and the world goroutine's thread CPU time
// (locked to its thread) p50/p99/max; the server process's CPU per
// client (user+system over the window, every goroutine and GC); in the
// sockets case the client process's CPU per client, bytes and batches
// each client received per second (protobuf messages, before WebSocket
// framing), messages a second, sockets the server closed, and where the
// bytes went (sim.ByteCounts: bursts, vanishes, updates by component,
// terrain); in both, the outbox's bytes delivered per account per second
// (the frames alone).
//
// Last, default/clients=1000/sockets is the game's default scene with the
// same clients (defaultScene): what the reference game sends a client
// when its mobs are not all walking all the time, for the bytes goal.
func BenchmarkGatewayClients(b *testing.B) {
	for _, n := range []int{250, 500, 1000} {
		b.Run(fmt.Sprintf("clients=%d/sinks", n), func(b *testing.B) { benchSinks(b, n) })
		b.Run(fmt.Sprintf("clients=%d/sockets", n), func(b *testing.B) { benchSockets(b, gatewayWorld(n)) })
	}
	b.Run("default/clients=1000/sockets", func(b *testing.B) { benchSockets(b, defaultScene(1000)) })
}

// defaultScene is the reference game's own scene for n players on
// gatewayWorld's square: the game's default dens (in 4 % of the columns,
// 4 mobs each: about 2,500 mobs around 1,000 players) and wandering (a
// pause of 2 s on average between legs).
func defaultScene(n int) game.Config {
	return game.Config{Seed: 1, Players: n, Area: 4000, MaterialiseBudget: 100_000}
}

// tickLoop steps the world on a 20 Hz ticker on a goroutine locked to its
// thread (the caller's), and measures each step.
type tickLoop struct {
	g    *game.Game
	tk   *time.Ticker
	wall []time.Duration
	cpu  []time.Duration
	late int // ticks that took longer than the interval

	delivered, entities float64
}

func newTickLoop(g *game.Game) *tickLoop {
	return &tickLoop{g: g, tk: time.NewTicker(g.Config().TickInterval)}
}

// step waits for the next tick and runs it; measure records it.
func (l *tickLoop) step(measure bool) game.Report {
	<-l.tk.C
	c0, t0 := threadCPU(), time.Now()
	r := l.g.Step()
	wall, cpu := time.Since(t0), threadCPU()-c0
	if measure {
		l.wall, l.cpu = append(l.wall, wall), append(l.cpu, cpu)
		if wall > l.g.Config().TickInterval {
			l.late++
		}
		l.delivered += float64(r.Outbox.BytesDelivered)
		l.entities += float64(r.Entities)
	}
	return r
}

// window is the measured ticks: run runs them under b.Loop.
type window struct {
	start     time.Time
	cpu0      time.Duration
	elapsed   time.Duration
	serverCPU time.Duration
}

func (l *tickLoop) run(b *testing.B) window {
	runtime.GC() // the warm-up's garbage is not the window's
	if *windowProfile != "" {
		name := *windowProfile + "." + strings.NewReplacer("/", "-", "=", "").Replace(b.Name())
		f, err := os.Create(name)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	w := window{start: time.Now(), cpu0: processCPU()}
	for b.Loop() {
		l.step(true)
	}
	w.elapsed, w.serverCPU = time.Since(w.start), processCPU()-w.cpu0
	return w
}

// report reports what both cases have.
func (l *tickLoop) report(b *testing.B, w window, n int) {
	b.ReportMetric(ms(game.Percentile(l.wall, 50)), "p50-ms")
	b.ReportMetric(ms(game.Percentile(l.wall, 99)), "p99-ms")
	b.ReportMetric(ms(slices.Max(l.wall)), "max-ms")
	b.ReportMetric(ms(game.Percentile(l.cpu, 50)), "cpu-p50-ms")
	b.ReportMetric(ms(game.Percentile(l.cpu, 99)), "cpu-p99-ms")
	b.ReportMetric(ms(slices.Max(l.cpu)), "cpu-max-ms")
	b.ReportMetric(float64(l.late), "late-ticks")
	ticks := float64(len(l.wall))
	b.ReportMetric(l.entities/ticks, "entities")
	sec := w.elapsed.Seconds()
	// The rate the loop held: below 20 when ticks overran; the per-second
	// costs below are at this rate.
	b.ReportMetric(ticks/sec, "ticks/s")
	// Milliseconds of CPU per second of wall time per client: a whole core
	// shared by the clients is 1000/N.
	b.ReportMetric(ms(w.serverCPU)/sec/float64(n), "server-cpu-ms/s/client")
	b.ReportMetric(ms(w.serverCPU)/sec/10, "server-cpu-%")
	b.ReportMetric(l.delivered/sec/float64(n), "frames-B/s/client")
}

// warm steps the world until gatewayWarmTicks have passed and logs the
// world it reached.
func (l *tickLoop) warm(b *testing.B) {
	var r game.Report
	spawned := 0
	for range gatewayWarmTicks {
		r = l.step(false)
		spawned += r.Spawned
	}
	b.Logf("warm: tick %d, %d entities, %d mobs spawned", r.Tick, r.Entities, spawned)
}

func benchSinks(b *testing.B, n int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g, err := game.New(gatewayWorld(n))
	if err != nil {
		b.Fatal(err)
	}
	for a := account.ID(1); a <= account.ID(n); a++ {
		g.Attach(a, discardSink{})
	}
	l := newTickLoop(g)
	defer l.tk.Stop()
	l.warm(b)
	w := l.run(b)
	l.report(b, w, n)
}

type discardSink struct{}

func (discardSink) Deliver(uint64, [][]byte) {}

func benchSockets(b *testing.B, cfg game.Config) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := cfg.Players
	cfg.NoBots = true
	g, err := game.NewModule(cfg)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := zone.New(g.Config().RuntimeConfig(), g)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Close() })
	bc := newWorld(b)
	job := clientJob{URL: bc.serveWith(rt, 0, benchLimits), Seed: 1, Roam: clientRoam, Every: clientMoveEvery, Full: *fullClients}
	if *clientProfile != "" {
		job.Profile = *clientProfile + "." + strings.NewReplacer("/", "-", "=", "").Replace(b.Name())
	}
	for a := account.ID(1); a <= account.ID(n); a++ {
		job.Tokens = append(job.Tokens, bc.token(a))
	}
	cp := startClientProcess(b, job)
	l := newTickLoop(g)
	defer l.tk.Stop()

	// The logins need the world to tick: step until the clients are in.
	for i := 0; ; i++ {
		if i == gatewayLoginTicks {
			b.Fatalf("%d clients did not log in within %d ticks", n, gatewayLoginTicks)
		}
		l.step(false)
		if ok, err := cp.ready(); err != nil {
			b.Fatal(err)
		} else if ok {
			break
		}
	}
	l.warm(b)
	m0 := cp.mark(b)
	w := l.run(b)
	m1 := cp.mark(b)
	l.report(b, w, n)
	sec := m1.Wall.Sub(m0.Wall).Seconds()
	bytes := float64(m1.Bytes-m0.Bytes) / sec / float64(n)
	b.ReportMetric(ms(m1.CPU-m0.CPU)/sec/float64(n), "client-cpu-ms/s/client")
	b.ReportMetric(bytes, "B/s/client")
	b.ReportMetric(bytes*8/1000, "kbit/s/client")
	b.ReportMetric(float64(m1.Batches-m0.Batches)/sec/float64(n), "batches/s/client")
	b.ReportMetric(float64(m1.Messages-m0.Messages)/sec/float64(n), "msgs/s/client")
	// Where the bytes went (sim.ByteCounts), per client per second.
	perSec := func(v0, v1 int) float64 { return float64(v1-v0) / sec / float64(n) }
	k0, k1 := m0.ByKind, m1.ByKind
	b.ReportMetric(perSec(k0.Bursts, k1.Bursts), "burst-B/s/client")
	b.ReportMetric(perSec(k0.Vanishes, k1.Vanishes), "vanish-B/s/client")
	b.ReportMetric(perSec(k0.Terrain, k1.Terrain), "terrain-B/s/client")
	for _, u := range []struct {
		t    int
		name string
	}{{int(game.WirePosition), "position"}, {int(game.WirePath), "path"}, {int(game.WireSpeed), "speed"}, {int(game.WireVisual), "visual"}, {int(game.WireHealth), "health"}, {int(game.WireExp), "exp"}} {
		b.ReportMetric(perSec(k0.Updates[u.t], k1.Updates[u.t]), u.name+"-B/s/client")
	}
	if *fullClients {
		b.ReportMetric(1, "full-clients")
	}
	b.ReportMetric(float64(m1.Inputs-m0.Inputs)/sec/float64(n), "inputs/s/client")
	b.ReportMetric(float64(m1.Closed), "closed")
	b.ReportMetric(float64(m1.Errors), "errors")
	if m1.Closed > 0 {
		b.Logf("%d of %d sockets closed under their clients (slow readers?)", m1.Closed, n)
	}
}

// clientJob is what the benchmark tells the client process, as one JSON
// line on its stdin.
type clientJob struct {
	URL    string
	Tokens []string // account i+1's
	Seed   uint64
	Roam   float64
	Every  time.Duration
	Full   bool // full sim.Clients, not lean ones
	// Profile, if set, is where the client process writes a CPU profile of
	// the measured window (from the first mark to the second).
	Profile string
}

// clientMark is the client process's answer to "mark": its counters so
// far, summed over the clients.
type clientMark struct {
	Wall                                     time.Time
	CPU                                      time.Duration // the process's user+system time
	Bytes, Messages, Batches, Inputs, Closed int
	Errors                                   int
	ByKind                                   sim.ByteCounts
}

// clientProc is the client process, seen from the benchmark.
type clientProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	done  chan struct{}
	err   error // of the process, once done is closed
}

// startClientProcess runs this test binary again as the client side of
// job (TestMain) and stops it at the benchmark's cleanup.
func startClientProcess(tb testing.TB, job clientJob) *clientProc {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), clientProcessEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	cp := &clientProc{cmd: cmd, in: in, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			cp.lines <- sc.Text()
		}
		cp.err = cmd.Wait()
		close(cp.done)
	}()
	tb.Cleanup(func() {
		_, _ = io.WriteString(in, "stop\n")
		_ = in.Close()
		select {
		case <-cp.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-cp.done
		}
	})
	b, err := json.Marshal(job)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := in.Write(append(b, '\n')); err != nil {
		tb.Fatal(err)
	}
	return cp
}

// ready reports, without waiting, whether the clients have logged in.
func (cp *clientProc) ready() (bool, error) {
	select {
	case l := <-cp.lines:
		if l == "ready" {
			return true, nil
		}
		return false, fmt.Errorf("client process: %q", l)
	case <-cp.done:
		return false, fmt.Errorf("client process ended: %v", cp.err)
	default:
		return false, nil
	}
}

func (cp *clientProc) mark(tb testing.TB) clientMark {
	tb.Helper()
	if _, err := io.WriteString(cp.in, "mark\n"); err != nil {
		tb.Fatal(err)
	}
	select {
	case l := <-cp.lines:
		var m clientMark
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			tb.Fatalf("client process: %q: %v", l, err)
		}
		return m
	case <-cp.done:
		tb.Fatalf("client process ended: %v", cp.err)
	}
	return clientMark{}
}

// clientProcess is the client side of BenchmarkGatewayClients: it reads a
// clientJob, logs every client in (a few at a time), says "ready", then
// sends each client's master a move to a random point within Roam of its
// home once every Every (the clients spread evenly over the period) and
// answers each "mark" line with a clientMark, until "stop" or the end of
// its input.
func clientProcess(r io.Reader, w io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	if !sc.Scan() {
		return fmt.Errorf("no job: %v", sc.Err())
	}
	var job clientJob
	if err := json.Unmarshal(sc.Bytes(), &job); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := len(job.Tokens)
	clients := make([]*sim.Client, n)
	masters := make([]uint64, n)
	homes := make([]torus.Pos, n)
	defer func() {
		for _, c := range clients {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 32)
		errs = make([]error, n)
	)
	for i, tok := range job.Tokens {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			c, err := sim.DialWith(lctx, job.URL, sim.DialOptions{Lean: !job.Full})
			if err != nil {
				errs[i] = err
				return
			}
			clients[i] = c
			if _, err := c.Login(lctx, tok); err != nil {
				errs[i] = err
				return
			}
			errs[i] = c.Wait(lctx, func(v *sim.View) bool {
				m, _ := v.You()
				p, ok := v.Position(m)
				masters[i], homes[i] = m, p
				return ok
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("login: %w", err)
	}
	if _, err := io.WriteString(w, "ready\n"); err != nil {
		return err
	}

	var inputs atomic.Int64
	stop := make(chan struct{})
	var driver sync.WaitGroup
	driver.Go(func() {
		// 100 slots a period: every 10 ms the next hundredth of the
		// clients each send a move.
		const slots = 100
		tk := time.NewTicker(job.Every / slots)
		defer tk.Stop()
		rngs := make([]*rand.Rand, n)
		for i := range rngs {
			rngs[i] = rand.New(rand.NewPCG(job.Seed, uint64(i)))
		}
		for slot := 0; ; slot = (slot + 1) % slots {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			for i := slot * n / slots; i < (slot+1)*n/slots; i++ {
				a, d := rngs[i].Float64()*2*math.Pi, job.Roam*math.Sqrt(rngs[i].Float64())
				x, y := homes[i].X+d*math.Cos(a), homes[i].Y+d*math.Sin(a)
				if _, err := clients[i].Move(ctx, masters[i], x, y); err == nil {
					inputs.Add(1)
				}
			}
		}
	})
	defer func() {
		close(stop)
		driver.Wait()
	}()
	var prof windowProf
	for sc.Scan() {
		switch sc.Text() {
		case "mark":
			if err := prof.toggle(job.Profile); err != nil {
				return err
			}
			m := clientMark{Wall: time.Now(), CPU: processCPU(), Inputs: int(inputs.Load())}
			for _, c := range clients {
				c.Look(func(v *sim.View) {
					s := v.Stats()
					m.Bytes += s.Bytes
					m.Messages += s.Messages
					m.Batches += s.Batches
					m.ByKind.Add(s.ByKind)
					m.Errors += len(v.Errors())
				})
				select {
				case <-c.Done():
					m.Closed++
				default:
				}
			}
			b, err := json.Marshal(m)
			if err != nil {
				return err
			}
			if _, err := w.Write(append(b, '\n')); err != nil {
				return err
			}
		case "stop":
			return nil
		}
	}
	return sc.Err()
}

// windowProf is the client process's CPU profile of the measured window:
// toggle starts it into file at the first mark and stops it at the second
// (nothing when file is empty).
type windowProf struct{ f *os.File }

func (p *windowProf) toggle(file string) error {
	if file == "" {
		return nil
	}
	if p.f != nil {
		pprof.StopCPUProfile()
		err := p.f.Close()
		p.f = nil
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	p.f = f
	return pprof.StartCPUProfile(f)
}

// ---- BenchmarkForwardedHop ----

// BenchmarkForwardedHop is the second benchmark of issue 15: the cost of
// one forwarded hop. Two zone nodes (zonetest: real node links over
// loopback TCP with mutual TLS, etcd leases), an 8 km torus of 2 km
// regions, a gateway on zone-0, and two clients on it: one whose player
// stands in zone-0's region (its master simulated on the gateway node:
// local) and one whose player stands in zone-1's (remote: its input
// travels to zone-1 and the change comes back as a forwarded frame). The
// nodes tick at 20 Hz of real time, each every 50 ms, zone-1 half a tick
// after zone-0 (the mean phase of two independent hosts). No dens: the
// world is the two players. One op is one round trip each, in turn (the
// first alternates): send a move to a new point and wait until the client
// sees its master's Path aim there. Reported: median and p99 of each, in
// ms and in ticks (ms / 50), and the differences (the hop).
func BenchmarkForwardedHop(b *testing.B) {
	grid := cells.GridConfig{RegionEdge: 2048}
	grid.World.Width, grid.World.Height = 8192, 8192
	gc := game.Config{Seed: 3, NoBots: true, Torus: grid.World, RegionEdge: 2048, DenChance: 1e-9}
	store := worldstore.NewMemory(nil)
	c := zonetest.Start(b, zonetest.Config{
		Nodes: 2, Grid: grid,
		Module:  func(int, string) (zone.Module, error) { return game.NewModule(gc) },
		Runtime: func(_ int, rc *zone.Config) { rc.WorldStore = store },
	})
	zero, one := c.Node("zone-0").Runtime, c.Node("zone-1").Runtime
	geo, table := zero.Geometry(), zero.Table()
	// A point in the middle of a region of each node, 1 km from any border.
	inside := func(node string) torus.Pos {
		for y := 1024.0; y < geo.Height(); y += 2048 {
			for x := 1024.0; x < geo.Width(); x += 2048 {
				if table.OwnerOf(torus.Pos{X: x, Y: y}) == node {
					return torus.Pos{X: x, Y: y}
				}
			}
		}
		b.Fatalf("%s owns no region", node)
		return torus.Pos{}
	}
	homes := []torus.Pos{inside("zone-0"), inside("zone-1")}
	ctx := context.Background()
	for i, h := range homes {
		if err := store.SavePlayer(ctx, worldstore.Player{Account: account.ID(i + 1), Epoch: 1, Pos: h}); err != nil {
			b.Fatal(err)
		}
	}
	bc := newWorld(b)
	url := bc.serveWith(zero, directory.NodeID(c.Node("zone-0").Number), benchLimits)

	// The nodes' clocks: one ticker at twice the rate, stepping them in
	// turn, so each ticks every 50 ms and zone-1 25 ms after zone-0.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(gc.WithDefaults().TickInterval / 2)
		defer tk.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			if i%2 == 0 {
				zero.Step()
			} else {
				one.Step()
			}
		}
	})
	b.Cleanup(func() {
		close(stop)
		wg.Wait()
	})

	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	type player struct {
		c      *sim.Client
		master uint64
		home   torus.Pos
		moves  int
		times  []time.Duration
	}
	players := make([]*player, 2)
	for i := range players {
		cl, err := sim.Dial(lctx, url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cl.Close() })
		if _, err := cl.Login(lctx, bc.token(account.ID(i+1))); err != nil {
			b.Fatal(err)
		}
		p := &player{c: cl, home: homes[i]}
		if err := cl.Wait(lctx, func(v *sim.View) bool {
			m, _ := v.You()
			pos, ok := v.Position(m)
			p.master = m
			return ok && geo.Within(pos, homes[i], 1)
		}); err != nil {
			b.Fatalf("player %d never appeared at home: %v", i+1, err)
		}
		players[i] = p
	}
	if s0, s1 := stats(zero), stats(one); s0.Spawned != 1 || s1.Spawned != 1 {
		b.Fatalf("zone-0 %+v, zone-1 %+v: want one player simulated on each", s0, s1)
	}

	// roundTrip sends p's master towards a point 600 m east or west of
	// home, in turn, and times it until the client sees the path aim
	// there. The points are far enough that the master, redirected every
	// few hundred ms, never arrives (an arrival would end the path before
	// a batch showed its aim), and differ every time. The input leaves at
	// a random moment of the tick, as a player's would: after the wait for
	// what the last input caused, the client is in step with the ticks.
	rng := rand.New(rand.NewPCG(1, 2))
	roundTrip := func(p *player) {
		to := geo.Normalise(geo.Translate(p.home, torus.Pos{X: float64(600 * (1 - 2*(p.moves%2))), Y: float64(p.moves % 16)}))
		p.moves++
		phase := time.NewTimer(time.Duration(rng.Int64N(int64(gc.WithDefaults().TickInterval))))
		<-phase.C
		t0 := time.Now()
		if _, err := p.c.Move(lctx, p.master, to.X, to.Y); err != nil {
			b.Fatal(err)
		}
		if err := p.c.Wait(lctx, func(v *sim.View) bool {
			e, ok := v.Entity(p.master)
			if !ok {
				return false
			}
			path := e.Components[game.WirePath]
			if len(path) != 13 || path[0] != 1 {
				return false
			}
			aim, err := zone.DecodePos(path[1:])
			return err == nil && geo.Within(aim, to, 0.01)
		}); err != nil {
			b.Fatalf("the move to %v was never seen: %v", to, err)
		}
		p.times = append(p.times, time.Since(t0))
	}
	for range 20 { // warm-up
		roundTrip(players[0])
		roundTrip(players[1])
	}
	players[0].times, players[1].times = nil, nil
	k := 0
	for b.Loop() {
		first := k % 2
		roundTrip(players[first])
		roundTrip(players[1-first])
		k++
	}
	tickMS := ms(gc.WithDefaults().TickInterval)
	local, remote := players[0].times, players[1].times
	for _, q := range []struct {
		name string
		p    float64
	}{{"p50", 50}, {"p99", 99}} {
		l, r := ms(game.Percentile(local, q.p)), ms(game.Percentile(remote, q.p))
		b.ReportMetric(l, "local-"+q.name+"-ms")
		b.ReportMetric(r, "remote-"+q.name+"-ms")
		b.ReportMetric(r-l, "hop-"+q.name+"-ms")
		b.ReportMetric(l/tickMS, "local-"+q.name+"-ticks")
		b.ReportMetric(r/tickMS, "remote-"+q.name+"-ticks")
		b.ReportMetric((r-l)/tickMS, "hop-"+q.name+"-ticks")
	}
	for i, p := range players {
		p.c.Look(func(v *sim.View) {
			for _, e := range v.Errors() {
				b.Errorf("player %d: error %v", i+1, e)
			}
		})
	}
}
