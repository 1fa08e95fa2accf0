package demo

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/internal/dburl"
	"github.com/shardwise/shardwise/internal/tcpproxy"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/netting/sqlstore"
	"github.com/shardwise/shardwise/nodename"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/worldstore/sqlworld"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonehost"
)

// WorldConfig is the whole-cluster demo's shape (RunWorld). Zero fields take
// the defaults documented on them (WithDefaults). A field a flag of
// "shardwise demo" sets is reported under that flag in errors.
type WorldConfig struct {
	// Duration is how long the bots play. Default 30s.
	Duration time.Duration
	// Zones are the zone nodes' names. Four split the torus in quadrants
	// meeting at the start square, where the bots play, so that it touches
	// every node; another number splits it in bands of columns, the first
	// and the last meeting at the seam through the start square: with two
	// both nodes hold players from the start, with three or more the
	// middle bands' nodes hold none until a region moves to one. Default
	// zone-1 … zone-4.
	Zones []string
	// Econs are the economy nodes' names. Default econ-1, econ-2, econ-3.
	Econs []string
	// Bots is how many bots play, logging in round robin over the zone
	// nodes' gateways. Default 40.
	Bots int
	// MoveAt is when the region most bots stand in moves to another node
	// (an online region move: a mass handoff). Default 35% of Duration.
	// Negative: no move.
	MoveAt time.Duration
	// KillAt is when one economy node is killed mid-epoch (its orphans
	// are swept by the survivors). Default 55% of Duration. Negative: no
	// kill.
	KillAt time.Duration
	// ZoneKillAt is when the zone node holding the most players' entities
	// is killed (the failover controller gives its regions to their
	// standbys once its lease expires; its players reconnect through
	// another gateway). Default 60% of Duration. Negative: no kill.
	ZoneKillAt time.Duration
	// ZoneTTL is the zone nodes' lease (zonehost.HostConfig.TTL), whole
	// seconds, when a zone node is killed (ZoneKillAt not negative): its
	// regions are re-owned once it expires. Default 5s: a live node
	// renews it every 1.7s, so a busy machine can hold renewals back for
	// 4.5s without fencing it (2s and 3s fenced every node of runs under
	// the race detector on a machine loaded sixteen times over). Without
	// a zone node kill the nodes keep coord's default lease (10s).
	ZoneTTL time.Duration
	// ShopChance and TradeChance are the bots' (sim.BotsConfig; a pair's
	// first trade comes before its first walk, TradeFirst). Defaults 0.3
	// and 0.5; negative: never.
	ShopChance, TradeChance float64
	// Allowance is the coins each bot's player is given before it logs
	// in (a ledger posting from the game's loot account, with three apples
	// from the shops' stock), so that the bots can shop and trade from the
	// start. Default 100; negative: none.
	Allowance int64
	// EpochMaxAge is the economy nodes' epoch age bound. Default 2s.
	EpochMaxAge time.Duration
	// Seed is the world's and the bots'. Default 1.
	Seed uint64
	// DataDir keeps the SQLite databases (world.db, ledger.db); "" is a
	// temporary directory removed at the end. The etcd data and the link
	// certificates (a CA and the nodes' private keys) are per run: they are
	// always in a temporary directory removed at the end.
	DataDir string
	// PostgresURL puts the world store and the ledger on PostgreSQL
	// instead of SQLite. Exclusive with DataDir.
	PostgresURL string
	// DashboardAddr, if set, is where the live dashboard (package
	// dashboard) is served while the demo runs: host:port, port 0 for any
	// free one. Default "": none.
	DashboardAddr string
	// Serve makes the bots play until Stop is closed instead of for
	// Duration (MoveAt and KillAt still count from the start); the report
	// follows as usual. Stop is required with Serve. A moment Stop comes
	// before is not made, and the report says so (not a failure), as it
	// does of the checks that depend on it.
	Serve bool
	Stop  <-chan struct{}
	// Progress is the progress line's interval. Default 1s; negative:
	// none.
	Progress time.Duration
	// Observe, if set, is called for every tick of every zone node, on
	// the node's goroutine, after the demo's own census (the dashboard's
	// collector). It holds back the node's next tick while it runs.
	Observe func(zonehost.HostReport)
	// OnEvent, if set, receives each announced moment's line (the region
	// move, the kill), as printed. The moments happen on goroutines of
	// their own, but the calls are serialised: one at a time, in the order
	// printed.
	OnEvent func(string)
	// OnStart, if set, is called once every node is up and before the
	// bots log in, with what a person needs to join (gateways, a token
	// source).
	OnStart func(WorldStart)
	// Logger receives the nodes' records. Default discard.
	Logger *slog.Logger
}

// WorldStart is the running cluster as the demo reports it at start.
type WorldStart struct {
	// Gateways are the zone nodes' gateway addresses (host:port; the
	// client protocol at ws://ADDR/ws, the browser client at http://ADDR/),
	// and Metrics their Prometheus addresses (http://ADDR/metrics), by node.
	Gateways, Metrics map[string]string
	// Etcd is the embedded etcd's client endpoint and Prefix the demo's key
	// prefix in it (shardwise members --endpoints … --prefix …).
	Etcd   string
	Prefix string
	// Token issues a login token for an account (accounts above the bots'
	// are free for people: FirstFreeAccount).
	Token            func(account.ID) (string, error)
	FirstFreeAccount account.ID
	// Where says where the world store and the ledger are.
	Where string
	// Dashboard is the dashboard's address (http://ADDR/, the play view at
	// http://ADDR/play), or "" without one.
	Dashboard string
}

// WithDefaults fills the zero fields.
func (c WorldConfig) WithDefaults() WorldConfig {
	if c.Duration == 0 {
		c.Duration = 30 * time.Second
	}
	if len(c.Zones) == 0 {
		c.Zones = []string{"zone-1", "zone-2", "zone-3", "zone-4"}
	}
	if len(c.Econs) == 0 {
		c.Econs = []string{"econ-1", "econ-2", "econ-3"}
	}
	if c.Bots == 0 {
		c.Bots = 40
	}
	if c.MoveAt == 0 {
		c.MoveAt = c.Duration * 35 / 100
	}
	if c.KillAt == 0 {
		c.KillAt = c.Duration * 55 / 100
	}
	if c.ZoneKillAt == 0 {
		c.ZoneKillAt = c.Duration * 60 / 100
	}
	if c.ZoneTTL == 0 {
		c.ZoneTTL = 5 * time.Second
	}
	if c.ShopChance == 0 {
		c.ShopChance = 0.3
	}
	if c.TradeChance == 0 {
		c.TradeChance = 0.5
	}
	if c.EpochMaxAge == 0 {
		c.EpochMaxAge = 2 * time.Second
	}
	if c.Allowance == 0 {
		c.Allowance = 100
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Progress == 0 {
		c.Progress = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate checks c after defaults.
func (c WorldConfig) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Duration < 0:
		return errcode.Config("--duration", c.Duration, "must be positive")
	case len(c.Zones) < 2:
		return errcode.Config("--zones", strings.Join(c.Zones, ","), "need at least two zone nodes: one world on several nodes is the point")
	case len(c.Econs) < 2:
		return errcode.Config("--econs", strings.Join(c.Econs, ","), "need at least two economy nodes: one is killed")
	case c.Bots < 1:
		return errcode.Config("--bots", c.Bots, "must be at least 1")
	case c.MoveAt >= c.Duration:
		return errcode.Config("--move-at", c.MoveAt, "must be inside --duration (negative: no region move)")
	case c.KillAt >= c.Duration:
		return errcode.Config("--kill-at", c.KillAt, "must be inside --duration (negative: no economy node killed)")
	case c.ZoneKillAt >= c.Duration:
		return errcode.Config("--zone-kill-at", c.ZoneKillAt, "must be inside --duration (negative: no zone node killed)")
	case c.ZoneTTL < time.Second || c.ZoneTTL%time.Second != 0:
		return errcode.Config("--zone-ttl", c.ZoneTTL, "must be a whole number of seconds, at least 1s")
	case c.ShopChance > 1:
		return errcode.Config("--shop-chance", c.ShopChance, "is a chance: at most 1 (0: never)")
	case c.TradeChance > 1:
		return errcode.Config("--trade-chance", c.TradeChance, "is a chance: at most 1 (0: never)")
	case c.EpochMaxAge < 0:
		return errcode.Config("--epoch", c.EpochMaxAge, "must be positive")
	case c.Bots > maxBots:
		return errcode.Config("--bots", c.Bots, fmt.Sprintf("at most %d: every bot is a WebSocket client in this process", maxBots))
	case c.Serve && c.Stop == nil:
		return errcode.Config("Stop", nil, "required with Serve: closing it ends the run")
	case c.DataDir != "" && c.PostgresURL != "":
		return errcode.Config("--data", c.DataDir, "cannot be combined with --postgres")
	}
	for _, l := range []struct {
		flag  string
		names []string
	}{{"--zones", c.Zones}, {"--econs", c.Econs}} {
		for i, n := range l.names {
			if err := nodename.Check(l.flag, n); err != nil {
				return err
			}
			if slices.Contains(l.names[:i], n) {
				return errcode.Config(l.flag, strings.Join(l.names, ","), "lists "+strconv.Quote(n)+" twice")
			}
		}
	}
	for _, z := range c.Zones {
		if slices.Contains(c.Econs, z) {
			return errcode.Config("--econs", strings.Join(c.Econs, ","), "names "+strconv.Quote(z)+", a zone node too")
		}
	}
	if c.PostgresURL != "" {
		if k, _, err := dburl.Parse("--postgres", c.PostgresURL); err != nil {
			return err
		} else if k != dburl.Postgres {
			return errcode.Config("--postgres", dburl.Redact(c.PostgresURL), `must be a "postgres://…" URL`)
		}
	}
	return nil
}

// The bots play close to the seams' crossing, the corner of four regions
// (and, with four nodes, of every node's quadrant): the players start in a
// square of startArea metres centred on it, and every leg goes to another
// quadrant around it between botReach/2 and botReach metres out, so that a
// walker at 5 m/s crosses a border every few seconds.
const (
	startArea = 100.0
	botReach  = 80.0
)

// allowanceApples is the goods side of the allowance: what a bot that
// gives goods in a trade starts with.
const allowanceApples = 3

// maxBots bounds WorldConfig.Bots.
const maxBots = 2000

// cluster is what the world demo runs: the token fixes the cluster id the
// gateways check.
const demoCluster = "shardwise-demo"

// worldDemo is one run of the world demo. Every goroutine it starts is
// joined by run.
type worldDemo struct {
	cfg  WorldConfig
	out  io.Writer                                        // a lockedWriter
	host func(context.Context, zonehost.HostConfig) error // zonehost.Host
	log  *slog.Logger
	// eventMu serialises the moments' announcements (OnEvent).
	eventMu sync.Mutex
	// playing is set once every zone node is up: a node that stops after
	// is a node lost mid-run.
	playing atomic.Bool

	etcd     *coord.Embedded
	prefix   string
	admin    *coord.Client
	ledger   *sqlstore.Store
	world    *sqlworld.Store
	dir      *directory.Memory
	issuer   *logintoken.Issuer
	loginPub ed25519.PublicKey
	ec       *econCluster
	watch    *orphanWatch
	census   *census
	grid     cells.Grid
	dash     *worldDash // nil without a dashboard

	mu    sync.Mutex
	nodes map[string]*zoneNode // by name
	// moved is the region move that was applied (zero before); moving
	// its two nodes from its announcement until it is handed over.
	moved  regionMove
	moving []string
	// zoneKill is the zone node killed and its failover's figures so far
	// (Node "" before the kill).
	zoneKill ZoneKillReport
	// zoneAffected are the accounts the killed node served or simulated at
	// the kill, zoneEntities the entities it simulated and theirs.
	zoneAffected map[account.ID]bool
	zoneEntities map[ecs.ID]bool
	// postingsBefore is the ledger's postings before the bots played;
	// fundingPostings how many of them this run's allowances wrote.
	postingsBefore, fundingPostings int64
	// breaches counts the ticks after which a zone node's invariant check
	// failed; breachExamples keeps the first few (under mu).
	breaches       int
	breachExamples []string
}

// zoneNode is one zone node of the demo and what its ticks reported last.
type zoneNode struct {
	name  string
	ready zonehost.HostReady
	game  *game.Game
	// exited is closed when Host has returned, with err its result and
	// early true if it returned before the demo stopped it. joined is the
	// run goroutine's (joinHosts).
	exited chan struct{}
	err    error
	early  bool
	joined bool
	// stop cancels the node's Host (the kill); proxy is its way to etcd;
	// killed is set at the kill, and makes its stores refuse it (killable).
	stop   context.CancelFunc
	proxy  *tcpproxy.Proxy
	killed atomic.Bool
	// rt is its runtime, for the kill's AbandonSessions (safe from any
	// goroutine, unlike the rest of the runtime).
	rt atomic.Pointer[zone.Runtime]

	// Under worldDemo.mu:
	last  zonehost.HostReport
	econ  game.EconomyStats
	ticks []time.Duration // the last tickWindow ticks' step times, a ring
	next  int

	// fromStore (under worldDemo.mu) counts the sessions its gateway
	// served whose master and pet died with another node, brought in
	// again from the store (zone.PlayerStats.Lost).
	fromStore int
}

const tickWindow = 40 // two seconds of ticks at 20 Hz

// regionMove is the applied region move.
type regionMove struct {
	Region   cells.RegionID
	From, To string
	Version  uint64
	At       time.Duration // since start
	// HandedOver is set once every node held the new table and the old
	// owner no player in the region, at HandedOverAt.
	HandedOver   bool
	HandedOverAt time.Duration
}

// RunWorld runs the whole-cluster demo: an embedded etcd; the zone nodes
// (zonehost.Host each, with its gateway and metrics, the reference game with an
// economy) splitting the torus; the economy nodes (econ, on loopback gRPC);
// the world store and the ledger on SQLite in DataDir or a temporary
// directory, or on PostgreSQL; bots playing through the real client
// protocol over WebSocket (walking across borders and the seam, fighting,
// looting, shopping, trading); at MoveAt an online region move, at KillAt an
// economy node killed and its orphans swept. It prints a progress line every
// Progress and returns the report; the error is for failures to run at all,
// invariant failures are in the report.
//
// out is written from several goroutines (the progress line, the moments,
// the sweep's lines), one whole line at a time under a lock of RunWorld's:
// it need not be safe for concurrent use itself.
func RunWorld(ctx context.Context, cfg WorldConfig, out io.Writer) (WorldReport, error) {
	return runWorld(ctx, cfg, out, zonehost.Host)
}

// runWorld is RunWorld with the zone nodes run by host (a test's stand-in
// for zonehost.Host).
func runWorld(ctx context.Context, cfg WorldConfig, out io.Writer, host func(context.Context, zonehost.HostConfig) error) (WorldReport, error) {
	if err := cfg.Validate(); err != nil {
		return WorldReport{}, err
	}
	cfg = cfg.WithDefaults()
	d := &worldDemo{
		cfg: cfg, out: &lockedWriter{w: out}, log: cfg.Logger, host: host,
		prefix: "/shardwise-demo/" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/",
		nodes:  map[string]*zoneNode{},
		census: newCensus(),
	}
	return d.run(ctx)
}

// lockedWriter serialises its writers (each Fprintf is one Write).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (d *worldDemo) run(ctx context.Context) (rep WorldReport, err error) {
	start := time.Now()
	// Said before any of the start-up work (the stores, etcd, the nodes:
	// seconds on a busy machine), so that a person sees at once that the
	// demo is running.
	fmt.Fprintf(d.out, "shardwise demo: starting an embedded etcd, %d zone nodes and %d economy nodes…\n", len(d.cfg.Zones), len(d.cfg.Econs))
	dataDir, scratch, cleanup, err := d.dirs()
	if err != nil {
		return rep, err
	}
	defer cleanup()
	// Everything below is stopped in reverse order of starting, whatever
	// happens.
	var stops []func() error
	defer func() {
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i]())
		}
		if e := errors.Join(errs...); e != nil && ctx.Err() == nil {
			fmt.Fprintf(d.out, "warning: stopping the cluster: %v\n", e)
		}
	}()

	where, err := d.openStores(ctx, dataDir)
	stops = append(stops, d.closeStores) // whatever opened before an error
	if err != nil {
		return rep, err
	}
	if d.etcd, err = startEtcd(ctx, filepath.Join(scratch, "etcd")); err != nil {
		return rep, err
	}
	stops = append(stops, d.etcd.Close)
	if d.admin, err = coord.Connect(ctx, coord.ClientConfig{Endpoints: d.etcd.Endpoints(), Prefix: d.prefix}); err != nil {
		return rep, err
	}
	stops = append(stops, d.admin.Close)
	if err := d.applyTable(ctx); err != nil {
		return rep, err
	}
	beforeFunding, err := d.ledger.PostingCount(ctx)
	if err != nil {
		return rep, err
	}
	if err := d.fund(ctx); err != nil {
		return rep, err
	}
	if d.postingsBefore, err = d.ledger.PostingCount(ctx); err != nil {
		return rep, err
	}
	d.fundingPostings = d.postingsBefore - beforeFunding
	if d.ec, err = startEcon(ctx, d.etcd.Endpoints(), d.prefix, d.ledger, d.cfg.Econs,
		econOptions{EpochMaxAge: d.cfg.EpochMaxAge, SweepBound: 2 * d.cfg.EpochMaxAge, MaxMovements: 256, TTL: 5 * time.Second}, d.log); err != nil {
		return rep, err
	}
	stops = append(stops, d.ec.stop)
	d.watch = newOrphanWatch(d.ec, d.out, d.cfg.EpochMaxAge)

	if d.dash, err = listenDashboard(d.cfg.DashboardAddr, d.log); err != nil {
		return rep, err
	}
	if d.dash != nil {
		stops = append(stops, d.dash.close)
	}
	hostsCtx, stopHosts := context.WithCancel(context.WithoutCancel(ctx))
	stops = append(stops, d.closeProxies) // after the nodes have stopped
	stops = append(stops, func() error { stopHosts(); return d.joinHosts() })
	if err := d.startZones(ctx, hostsCtx, scratch); err != nil {
		return rep, err
	}
	st := d.startInfo(where)
	if d.dash != nil {
		d.dash.serve(d, st)
		st.Dashboard = d.dash.addr()
	}
	d.playing.Store(true)
	length := "for " + d.cfg.Duration.String()
	if d.cfg.Serve {
		length = "until stopped"
	}
	fmt.Fprintf(d.out, "world demo: %d zone nodes (%s), %d economy nodes (%s), %d bots %s; world store and ledger on %s\n",
		len(d.cfg.Zones), strings.Join(d.cfg.Zones, " "), len(d.cfg.Econs), strings.Join(d.cfg.Econs, " "), d.cfg.Bots, length, where)
	for _, n := range d.cfg.Zones {
		fmt.Fprintf(d.out, "  %s: gateway ws://%s/ws  metrics http://%s/metrics\n", n, st.Gateways[n], st.Metrics[n])
	}
	if st.Dashboard != "" {
		fmt.Fprintf(d.out, "  dashboard http://%s/  (play as a new player: http://%s/play)\n", st.Dashboard, st.Dashboard)
	}
	if d.cfg.OnStart != nil {
		d.cfg.OnStart(st)
	}

	bots, err := sim.StartBots(ctx, d.botsConfig(st))
	if err != nil {
		return rep, err
	}
	playStart := time.Now()
	var (
		loadCtx  context.Context
		stopLoad context.CancelFunc
	)
	if d.cfg.Serve {
		loadCtx, stopLoad = context.WithCancel(ctx) // until Stop
	} else {
		loadCtx, stopLoad = context.WithTimeout(ctx, d.cfg.Duration)
	}
	defer stopLoad()
	bgCtx, stopBackground := context.WithCancel(ctx)
	var background sync.WaitGroup
	background.Go(func() { d.progress(bgCtx, playStart, bots) })
	background.Go(func() { d.watch.watch(bgCtx, d.log) })
	var moveErr, killErr, zoneKillErr error
	var moments sync.WaitGroup
	if d.cfg.MoveAt >= 0 {
		moments.Go(func() { moveErr = d.moveAt(loadCtx, playStart) })
	}
	if d.cfg.KillAt >= 0 {
		moments.Go(func() { killErr = d.killAt(ctx, loadCtx, playStart) })
	}
	if d.cfg.ZoneKillAt >= 0 {
		moments.Go(func() { zoneKillErr = d.zoneKillAt(loadCtx, playStart) })
	}
	if d.cfg.Serve {
		select {
		case <-d.cfg.Stop:
		case <-ctx.Done():
		}
		stopLoad()
	}
	<-loadCtx.Done()
	played := time.Since(playStart)
	moments.Wait()

	// The end: the players are counted while still logged in, then the
	// bots log out, the sweep finishes the killed node's orphans and the
	// economy settles.
	players := d.countPlayers(ctx, bots)
	botStats, botErr := bots.Stop()
	botErr = gaveUp(botErr)
	orphanErr := d.watch.wait(ctx, 3*2*d.cfg.EpochMaxAge+10*time.Second)
	stopBackground()
	background.Wait()
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	stopHosts()
	hostErr := d.joinHosts()
	settleErr := d.ec.closeExcept(d.watch.counts().Killed)
	for _, e := range []error{moveErr, killErr, zoneKillErr, orphanErr, botErr, hostErr, settleErr} {
		if e != nil {
			fmt.Fprintf(d.out, "warning: %v\n", e)
		}
	}
	rep, err = d.report(ctx, runEnd{
		bots: botStats, botErr: botErr, players: players, played: played, stopped: d.cfg.Serve,
		moveErr: moveErr, killErr: killErr, zoneKillErr: zoneKillErr, runErr: errors.Join(orphanErr, hostErr, settleErr),
	})
	rep.Elapsed = time.Since(start)
	return rep, err
}

// gaveUp keeps, of the bots' errors (sim.Bots.Stop), those of the bots
// that gave up: not a bot stopped by the end of the play (context.Canceled,
// a bot still logging in when a --serve run is stopped).
func gaveUp(err error) error {
	var kept []error
	for _, e := range unjoin(err) {
		if !errors.Is(e, context.Canceled) {
			kept = append(kept, e)
		}
	}
	return errors.Join(kept...)
}

// dirs returns the directory the run keeps its databases in (DataDir, or
// the scratch directory without one), saying what it found in one the user
// named, and the scratch directory: a temporary directory for what lives
// and dies with the run (the etcd data, the link certificates with their
// private keys), removed by cleanup.
func (d *worldDemo) dirs() (data, scratch string, cleanup func(), err error) {
	tmp, err := os.MkdirTemp("", "shardwise-demo-")
	if err != nil {
		return "", "", nil, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	if d.cfg.DataDir == "" {
		return tmp, tmp, cleanup, nil
	}
	if err := os.MkdirAll(d.cfg.DataDir, 0o755); err != nil {
		cleanup()
		return "", "", nil, errcode.Config("--data", d.cfg.DataDir, err.Error())
	}
	var found []string
	for _, f := range []string{"world.db", "ledger.db"} {
		if _, err := os.Stat(filepath.Join(d.cfg.DataDir, f)); err == nil {
			found = append(found, f)
		}
	}
	if len(found) > 0 {
		fmt.Fprintf(d.out, "--data %s: reusing %s from an earlier run (players resume where they were saved; the money audit covers every run's postings)\n",
			d.cfg.DataDir, strings.Join(found, " and "))
	}
	return d.cfg.DataDir, tmp, cleanup, nil
}

// openStores opens the world store and the ledger.
func (d *worldDemo) openStores(ctx context.Context, dir string) (where string, err error) {
	if u := d.cfg.PostgresURL; u != "" {
		if d.world, err = sqlworld.Open(ctx, u); err != nil {
			return "", errcode.Config("--postgres", dburl.Redact(u), err.Error())
		}
		if d.ledger, err = sqlstore.Open(ctx, u); err != nil {
			return "", errcode.Config("--postgres", dburl.Redact(u), err.Error())
		}
		return "PostgreSQL " + dburl.Redact(u), nil
	}
	if d.world, err = sqlworld.OpenSQLite(ctx, filepath.Join(dir, "world.db")); err != nil {
		return "", err
	}
	if d.ledger, err = sqlstore.OpenSQLite(ctx, filepath.Join(dir, "ledger.db")); err != nil {
		return "", err
	}
	return "SQLite in " + dir, nil
}

func (d *worldDemo) closeStores() error {
	var errs []error
	if d.world != nil {
		errs = append(errs, d.world.Close())
	}
	if d.ledger != nil {
		errs = append(errs, d.ledger.Close())
	}
	return errors.Join(errs...)
}

// applyTable writes the first region table: the start square, centred on
// the seams' crossing (a corner of four regions), touches every node.
// With four nodes each owns a quadrant of the torus; with another number,
// bands of columns, the first and the last meeting at the seam.
func (d *worldDemo) applyTable(ctx context.Context) error {
	grid, err := cells.NewGrid(game.Config{}.RuntimeConfig().Grid)
	if err != nil {
		return err
	}
	d.grid = grid
	owners := make([]string, grid.Regions())
	zones := d.cfg.Zones
	for r := range owners {
		col, row := grid.Coords(cells.RegionID(r))
		if len(zones) == 4 {
			q := 0
			if col >= grid.Cols()/2 {
				q++
			}
			if row >= grid.Rows()/2 {
				q += 2
			}
			owners[r] = zones[q]
			continue
		}
		// Bands of columns, not shifted: the seam (column 0 meets the last)
		// is the border between the first node, east of it, and the last,
		// west of it, so only those two touch the start square.
		owners[r] = zones[col*len(zones)/grid.Cols()]
	}
	t, err := cells.NewTable(grid, 1, owners)
	if err != nil {
		return err
	}
	// Forced: the nodes it names join only once it is there.
	return d.admin.ApplyRegions(ctx, t, coord.ApplyOptions{Force: true})
}

// fund posts every bot player's allowance, with a per-run id.
func (d *worldDemo) fund(ctx context.Context) error {
	if d.cfg.Allowance <= 0 {
		return nil
	}
	run := strings.Trim(strings.TrimPrefix(d.prefix, "/shardwise-demo/"), "/")
	for a := account.ID(1); a <= account.ID(d.cfg.Bots); a++ {
		p := ledger.Posting{
			ID: "allowance-" + run + "-" + a.String(),
			Legs: []ledger.Leg{
				ledger.Credit(game.CoinsAccount(a), d.cfg.Allowance), ledger.Debit(game.LootAccount, d.cfg.Allowance),
				ledger.Credit(game.GoodsAccount(a, game.Apple), allowanceApples), ledger.Debit(game.ShopGoodsAccount(game.Apple), allowanceApples),
			},
			Meta: map[string]string{"kind": "allowance"},
		}
		if err := d.ledger.Post(ctx, p); err != nil {
			return fmt.Errorf("demo: allowance of account %v: %w", a, err)
		}
	}
	return nil
}

// startZones writes the link certificates in the scratch directory and
// starts every zone node, and waits until all are ticking.
func (d *worldDemo) startZones(ctx, hostsCtx context.Context, scratch string) error {
	certs := filepath.Join(scratch, "certs")
	if err := link.WriteClusterCerts(certs, demoCluster, d.cfg.Zones, time.Now(), 24*time.Hour); err != nil {
		return err
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return err
	}
	d.loginPub = pub
	if d.issuer, err = logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: demoCluster, Key: priv}); err != nil {
		return err
	}
	if d.dir, err = directory.NewMemory(directory.MemoryConfig{}); err != nil {
		return err
	}
	gc := game.Config{
		Seed: d.cfg.Seed, NoBots: true, Players: d.cfg.Bots, Area: startArea,
		Economy: game.EconomyConfig{Ledger: game.ClientEconomy{Client: d.ec.client}},
	}
	readyCh := make(chan zonehost.HostReady, len(d.cfg.Zones))
	exits := make(chan *zoneNode, len(d.cfg.Zones))
	for _, name := range d.cfg.Zones {
		g, err := game.NewModule(gc)
		if err != nil {
			return err
		}
		zn := &zoneNode{name: name, game: g, exited: make(chan struct{}), ticks: make([]time.Duration, 0, tickWindow)}
		// The node reaches etcd through a proxy of its own, so that the
		// kill can cut it off (zonekill.go).
		if zn.proxy, err = tcpproxy.Start(d.etcd.Endpoints()[0]); err != nil {
			g.Close()
			return err
		}
		nodeCtx, stop := context.WithCancel(hostsCtx)
		zn.stop = stop
		rc := gc.RuntimeConfig()
		rc.WorldSeed = gc.Seed
		hc := zonehost.HostConfig{
			Coord: coord.ClientConfig{Endpoints: []string{zn.proxy.Endpoint()}, Prefix: d.prefix},
			Name:  name, CertDir: certs, Module: g, Runtime: rc,
			MetricsAddr: "127.0.0.1:0", GatewayAddr: "127.0.0.1:0",
			// Every bot connects from this process over loopback: one
			// address, up to maxBots sockets.
			GatewayLimits: gateway.Limits{MaxConnsPerAddr: -1},
			Cluster:       demoCluster, LoginKeys: []ed25519.PublicKey{pub},
			Directory:  killableDirectory{d.dir, killable{&zn.killed}},
			WorldStore: killableWorld{d.world, killable{&zn.killed}},
			// With a zone node to kill, a lease short enough for its
			// regions to be re-owned within the run; without, coord's
			// default (10s), which a loaded machine does not fence.
			TTL:     d.zoneTTL(),
			Logger:  d.log.With("node", name),
			OnReady: func(r zonehost.HostReady) { zn.ready = r; readyCh <- r },
			OnTick:  func(r zonehost.HostReport) { d.tick(zn, r) },
		}
		d.mu.Lock()
		d.nodes[name] = zn
		d.mu.Unlock()
		go func() {
			err := d.host(nodeCtx, hc)
			stop()
			g.Close()             // after the last tick: the game's economy workers stop
			d.census.forget(name) // it holds nothing any more
			zn.err, zn.early = err, hostsCtx.Err() == nil
			if zn.early && d.playing.Load() && !zn.killed.Load() {
				fmt.Fprintf(d.out, "warning: zone node %s stopped mid-run: %v\n", name, err)
			}
			close(zn.exited)
			exits <- zn
		}()
	}
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for range d.cfg.Zones {
		select {
		case <-readyCh:
		case zn := <-exits: // before its OnReady: it failed to start
			if zn.err == nil {
				return fmt.Errorf("demo: zone node %s stopped while starting", zn.name)
			}
			return fmt.Errorf("demo: zone node %s: %w", zn.name, zn.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return errors.New("demo: the zone nodes did not all start within 60s")
		}
	}
	return nil
}

// zoneTTL is the zone nodes' lease: ZoneTTL with a zone node kill, else 0
// (coord's default).
func (d *worldDemo) zoneTTL() time.Duration {
	if d.cfg.ZoneKillAt < 0 {
		return 0
	}
	return d.cfg.ZoneTTL
}

// closeProxies closes the zone nodes' etcd proxies, once the nodes have
// stopped.
func (d *worldDemo) closeProxies() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range d.nodes {
		if n.proxy != nil {
			n.proxy.Cut()
		}
	}
	return nil
}

// joinHosts waits for every zone node's Host to return and returns the
// errors of their stopping; idempotent. A node that stopped before the
// demo stopped it is not among them: startZones returns its error, or the
// run warns of it as it happens and the report fails on it
// (ZoneNodeReport.Stopped).
func (d *worldDemo) joinHosts() error {
	d.mu.Lock()
	nodes := make([]*zoneNode, 0, len(d.nodes))
	for _, n := range d.nodes {
		nodes = append(nodes, n)
	}
	d.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		<-n.exited
		if n.joined {
			continue
		}
		n.joined = true
		if n.err != nil && !n.early && !n.killed.Load() {
			errs = append(errs, fmt.Errorf("%s: %w", n.name, n.err))
		}
	}
	return errors.Join(errs...)
}

// tick is every zone node's OnTick: the census, the node's last report
// and step time, the game's economy counters, then the caller's observer.
func (d *worldDemo) tick(zn *zoneNode, r zonehost.HostReport) {
	zn.rt.Store(r.Runtime)
	d.census.observe(zn.name, r.Runtime)
	if d.dash != nil {
		d.dash.col.Zone(r)
	}
	es := zn.game.EconomyStats()
	breach := r.Runtime.CheckInvariants() // on the runtime's goroutine, as it must be
	fromStore := r.Runtime.PlayerStats().Lost
	kept := r
	kept.Runtime = nil // valid only during the call
	d.mu.Lock()
	if breach != nil {
		if d.breaches++; len(d.breachExamples) < 3 {
			d.breachExamples = append(d.breachExamples, fmt.Sprintf("%s after tick %d: %v", zn.name, r.Tick, breach))
		}
	}
	zn.last, zn.econ, zn.fromStore = kept, es, fromStore
	if len(zn.ticks) < tickWindow {
		zn.ticks = append(zn.ticks, r.Took)
	} else {
		zn.ticks[zn.next] = r.Took
		zn.next = (zn.next + 1) % tickWindow
	}
	d.mu.Unlock()
	if d.cfg.Observe != nil {
		d.cfg.Observe(r)
	}
}

func (d *worldDemo) startInfo(where string) WorldStart {
	st := WorldStart{
		Gateways: map[string]string{}, Metrics: map[string]string{},
		Etcd: d.etcd.Endpoints()[0], Prefix: d.prefix, Where: where,
		FirstFreeAccount: account.ID(d.cfg.Bots + 1),
		Token: func(a account.ID) (string, error) {
			tok, _, err := d.issuer.Issue(a, gateway.Audience)
			return tok, err
		},
	}
	for _, n := range d.cfg.Zones {
		r := d.nodes[n].ready
		st.Gateways[n], st.Metrics[n] = r.GatewayAddr, r.MetricsAddr
	}
	return st
}

func (d *worldDemo) botsConfig(st WorldStart) sim.BotsConfig {
	var urls []string
	for _, n := range d.cfg.Zones {
		urls = append(urls, "ws://"+st.Gateways[n]+"/ws")
	}
	return sim.BotsConfig{
		Gateways: urls, Token: st.Token, Count: d.cfg.Bots, Seed: d.cfg.Seed,
		Reach:      botReach,
		ShopChance: max(d.cfg.ShopChance, 0), TradeChance: max(d.cfg.TradeChance, 0), TradeFirst: true,
	}
}
