package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/dashboard"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/zone"
)

// newZoneCmd is "shardwise zone": one zone node as its own process
// (zone.Host), running the reference game or the wander example, printing
// a status line about once a second.
func newZoneCmd() *cobra.Command {
	var (
		etcd      etcdFlags
		host      zone.HostConfig
		gc        game.Config
		module    string
		entities  int
		ticks     int
		noHandoff bool
		verbose   bool
		cluster   string
		loginPub  string
		economy   string
		dashAddr  string
		gwLimits  gateway.Limits
	)
	// The configuration fields the flags below set, and those flags.
	flagOf := map[string]string{
		"HostConfig.Coord.Endpoints":               "--endpoints",
		"HostConfig.Coord.Prefix":                  "--prefix",
		"HostConfig.Coord.DialTimeout":             "--timeout",
		"HostConfig.Name":                          "--name",
		"HostConfig.CertDir":                       "--certs",
		"HostConfig.ListenAddr":                    "--listen",
		"HostConfig.AdvertiseAddr":                 "--advertise",
		"HostConfig.MetricsAddr":                   "--metrics",
		"HostConfig.TTL":                           "--ttl",
		"HostConfig.GatewayAddr":                   "--gateway",
		"HostConfig.Cluster":                       "--cluster",
		"HostConfig.LoginKeys":                     "--login-pub",
		"HostConfig.DirectoryURL":                  "--directory",
		"HostConfig.WorldStoreURL":                 "--world-store",
		"HostConfig.GatewayLimits.HTTPReadTimeout": "--gateway-read-timeout",
		"HostConfig.GatewayLimits.HTTPIdleTimeout": "--gateway-idle-timeout",
		"HostConfig.GatewayLimits.MaxConnsPerAddr": "--gateway-conns-per-addr",
		"HostConfig.Runtime.TickInterval":          "--tick",
		"HostConfig.Runtime.MaterialiseBudget":     "--materialise-budget",
		"Seed":                                     "--seed",
		"Players":                                  "--players",
		"Area":                                     "--area",
		"TickInterval":                             "--tick",
		"MaterialiseBudget":                        "--materialise-budget",
		"Entities":                                 "--entities",
	}
	cmd := &cobra.Command{
		Use:   "zone",
		Short: "Run one zone node (the reference game or wander), with its peers found through etcd",
		Long: "zone runs one zone node as its own process: it registers in etcd as --name\n" +
			"(role zone, publishing its link address), serves the node link with the\n" +
			"certificate --certs holds for --name (see \"shardwise certs\"), and simulates\n" +
			"the regions the region table gives it (\"shardwise regions new\" writes a table\n" +
			"over the grid the node runs, the game's: 128 km torus, 8 km regions;\n" +
			"\"shardwise regions apply\" stores it). Every other zone member is a link\n" +
			"peer; the entities they simulate near this node's viewers arrive as render\n" +
			"ghosts.\n" +
			"\n" +
			"--module game (the default) runs the reference game: every node runs it from\n" +
			"the same --seed and --players, each spawning the players whose homes it owns.\n" +
			"--module wander runs examples/wander: --entities wanderers spawned in the\n" +
			"--area square, each on the node owning its spawn region, each staying inside\n" +
			"that region.\n" +
			"\n" +
			"When a new table moves a region away, the node hands every entity standing\n" +
			"in it to the new owner over the link, under the same id, within a few ticks;\n" +
			"an entity that walks past a border is handed over the same way. The game's\n" +
			"dens and their mobs belong to the region's columns: the old owner removes\n" +
			"them and the new owner sets them up again. --no-handoff turns handoff off:\n" +
			"entities then stay with the node that simulates them.\n" +
			"\n" +
			"It prints a ready line, a status line about once a second (entities, those\n" +
			"simulated and frozen in a handoff, regions, render ghosts, peers, handoffs),\n" +
			"a line when the table changes, and a summary at the end: after --ticks ticks,\n" +
			"on interrupt, or when the node loses its lease (exit status 1). With\n" +
			"--metrics it serves Prometheus metrics at http://ADDR/metrics, among them\n" +
			"shardwise_zone_region_entities{region} (entities simulated per region) and\n" +
			"shardwise_zone_handoffs_total{event} (docs/metrics.md lists them all), and\n" +
			"publishes the address in its member record, where \"shardwise top\" finds it.\n" +
			"With --dashboard ADDR it serves the live dashboard at http://ADDR/: the\n" +
			"region table's map with this node's entities and the handoffs it sees, and\n" +
			"its numbers (the demo's dashboard shows every node of its cluster).\n" +
			"\n" +
			"With --gateway ADDR the node serves players: the client protocol's WebSocket\n" +
			"at ws://ADDR/ws and the browser client at http://ADDR/ (docs/protocol.md).\n" +
			"A client may connect to any node's gateway; that node serves it for the whole\n" +
			"session, wherever its player walks. Logins are tokens for --cluster signed\n" +
			"with the login key whose public half is --login-pub (\"shardwise token\").\n" +
			"Every gateway of a cluster must share one session directory, --directory\n" +
			"redis://HOST:PORT, and one world store, --world-store sqlite:///PATH (the\n" +
			"processes of one machine can share the file) or postgres://…, where players\n" +
			"are kept between sessions; a node alone in its region table may leave both\n" +
			"out (they are then in memory, gone when it stops). --no-bots starts the\n" +
			"reference game without its bot players, so that only clients play; accounts\n" +
			"1 to --players form parties of three.\n" +
			"\n" +
			"With --economy the reference game has money: a mob's killer is paid its loot,\n" +
			"den keepers sell goods, and players trade across borders, every change a\n" +
			"movement on the economy node that owns its scope (\"shardwise econ\", found\n" +
			"in the same etcd); the zone node never writes money itself.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ticks < 0 {
				return withCode(errcode.Config("--ticks", ticks, "must not be negative (0 runs until interrupted)"))
			}
			if _, _, err := net.SplitHostPort(dashAddr); dashAddr != "" && err != nil {
				return withCode(errcode.Config("--dashboard", dashAddr, "must be host:port (port 0 picks a free one)"))
			}
			// game.Config and HostConfig read 0 as "the default": a 0
			// typed on the command line is refused instead, or means what
			// the flag's help says.
			switch {
			case gc.TickInterval == 0:
				return withCode(errcode.Config("--tick", gc.TickInterval, "must be positive"))
			case gc.Area == 0:
				return withCode(errcode.Config("--area", gc.Area, "must be positive and fit the torus"))
			}
			if host.PeerWait == 0 {
				host.PeerWait = -1 // the help: 0 does not wait
			}
			if err := gatewayLimitFlags(cmd, &host, gwLimits); err != nil {
				return withCode(err)
			}
			if economy != "" {
				if module != "game" {
					return withCode(errcode.Config("--economy", economy, "is for --module game"))
				}
				ledger, closeEconomy, err := dialEconomy(cmd.Context(), etcd, economy, host.CertDir, host.Name)
				if err != nil {
					return withCode(err)
				}
				defer closeEconomy()
				gc.Economy.Ledger = ledger
			}
			mod, err := zoneModule(cmd, module, gc, entities)
			if err != nil {
				return withCode(renameToFlags(err, flagOf))
			}
			if c, ok := mod.(io.Closer); ok {
				// After the runtime's last Step: the game's economy
				// workers stop (the runtime does not close its module).
				defer c.Close()
			}
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			out := cmd.OutOrStdout()
			// NewModule accepted the step, so it is positive.
			every := max(1, uint64(time.Second/gc.WithDefaults().TickInterval))
			st := &zoneStatus{out: out, name: host.Name, every: every}
			host.Coord = coord.ClientConfig{Endpoints: etcd.endpoints, Prefix: etcd.prefix, DialTimeout: etcd.timeout}
			host.Module = mod
			host.Runtime = gc.RuntimeConfig()
			host.Runtime.NoHandoff = noHandoff
			host.Runtime.WorldSeed = gc.Seed
			if host.GatewayAddr != "" || cmd.Flags().Changed("cluster") {
				host.Cluster = cluster
			}
			if loginPub != "" {
				pub, err := readLoginPub("--login-pub", loginPub)
				if err != nil {
					return withCode(err)
				}
				host.LoginKeys = []ed25519.PublicKey{pub}
			} else if host.GatewayAddr != "" {
				return withCode(errcode.Config("--login-pub", loginPub, `required with --gateway: the login public key file ("shardwise token keygen")`))
			}
			host.Ticks = uint64(ticks)
			host.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			host.OnReady = st.ready
			host.OnTick = st.tick
			if dashAddr != "" {
				dc := dashboard.CollectorConfig{Logger: host.Logger} // wander: every entity alike
				if module == "game" {
					dc.Kinds = game.KindOf
				}
				col := dashboard.NewCollector(dc)
				srv, err := dashboard.Listen("--dashboard", dashAddr, col, dashboard.HandlerConfig{}, host.Logger)
				if err != nil {
					return withCode(err)
				}
				defer func() { _ = srv.Close() }()
				st.dashboard = srv.Addr()
				host.OnTick = func(r zone.HostReport) {
					st.tick(r)
					col.Zone(r)
				}
			}
			err = zone.Host(cmd.Context(), host)
			if st.ticks > 0 {
				st.summary()
			}
			return withCode(renameToFlags(indexless(err), flagOf))
		},
	}
	etcd.register(cmd)
	f := cmd.Flags()
	f.StringVar(&host.Name, "name", "", "this node's name: its member name, its owner name in the region table, its certificate (required)")
	f.StringVar(&host.CertDir, "certs", "", `directory written by "shardwise certs" holding this node's certificate (required)`)
	f.StringVar(&host.ListenAddr, "listen", "127.0.0.1:0", "address the node link listens on (port 0: any free port)")
	f.StringVar(&host.AdvertiseAddr, "advertise", "", "link address published for peers (default: the one listened on)")
	f.StringVar(&host.MetricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics and the probes /healthz and /readyz (port 0: any free port; default: not served)")
	f.StringVar(&dashAddr, "dashboard", "", "serve the live dashboard of this node's view (its regions, entities, ghosts and handoffs) at http://ADDR/ (port 0: any free port; default: not served)")
	f.DurationVar(&host.TTL, "ttl", 0, "lease TTL, whole seconds: the node is fenced this long after etcd stops hearing from it (0: 10s)")
	f.DurationVar(&host.PeerWait, "peer-wait", 10*time.Second, "before the first tick, wait this long for the table's other nodes to be connected (0 or negative: do not wait)")
	f.IntVar(&ticks, "ticks", 0, "ticks to run; 0 runs until interrupted")
	f.DurationVar(&gc.TickInterval, "tick", 50*time.Millisecond, "the fixed step (every node of a world must use the same)")
	f.Uint64Var(&gc.Seed, "seed", 1, "world seed: every node of a world must use the same")
	f.StringVar(&module, "module", "game", "the zone module: game (the reference game) or wander (examples/wander)")
	f.IntVar(&gc.Players, "players", 64, "--module game: players of the whole world (a master and a pet each), each on the node owning its home")
	f.IntVar(&entities, "entities", 64, "--module wander: wanderers of the whole world, each on the node owning its spawn region")
	f.Float64Var(&gc.Area, "area", 2000, "side in metres of the start square, centred on the seams' crossing")
	f.IntVar(&gc.MaterialiseBudget, "materialise-budget", 0, "columns materialised per tick (0: default 64)")
	f.StringVar(&host.GatewayAddr, "gateway", "", "serve players at ADDR: the WebSocket at ws://ADDR/ws, the browser client at http://ADDR/ (port 0: any free port; default: no gateway)")
	f.StringVar(&cluster, "cluster", defaultCluster, "--gateway: the cluster id login tokens must name")
	f.StringVar(&loginPub, "login-pub", "", `--gateway: the login public key file ("shardwise token keygen --pub"); required with --gateway`)
	f.StringVar(&host.DirectoryURL, "directory", "", "--gateway: the session directory every gateway shares, redis://HOST:PORT (default: in memory, for a node alone in its table)")
	f.StringVar(&host.WorldStoreURL, "world-store", "", "--gateway: where players are kept, sqlite:///PATH or postgres://… (default: in memory, for a node alone in its table)")
	f.DurationVar(&gwLimits.HTTPReadTimeout, "gateway-read-timeout", gateway.DefaultHTTPReadTimeout, "--gateway: longest time to read one HTTP request (a WebSocket upgrade until it is upgraded)")
	f.DurationVar(&gwLimits.HTTPIdleTimeout, "gateway-idle-timeout", gateway.DefaultHTTPIdleTimeout, "--gateway: close an HTTP keep-alive connection idle this long between requests")
	f.IntVar(&gwLimits.MaxConnsPerAddr, "gateway-conns-per-addr", gateway.DefaultMaxConnsPerAddr, "--gateway: connections one remote IP address may hold open at once; more are closed as accepted (0: no cap)")
	f.StringVar(&economy, "economy", "", `--module game: money, loot, shops and trades through the economy nodes in etcd ("shardwise econ"): "tls" (mutual TLS with this node's --certs) or "plaintext" (to loopback nodes only); default: no economy`)
	f.BoolVar(&gc.NoBots, "no-bots", false, "--module game: no bot players, only clients through the gateways (accounts 1 to --players still form parties)")
	f.BoolVar(&noHandoff, "no-handoff", false, "never hand entities over: they stay with this node wherever they walk, and a region move leaves them here")
	f.BoolVar(&verbose, "verbose", false, "log node events (joins, peers, table versions) to stderr")
	return cmd
}

// gatewayLimitFlags sets host.GatewayLimits from the --gateway-* flags
// typed: each only with --gateway, a 0 timeout refused (HostConfig would
// read it as the default), a cap of 0 meaning no cap as the help says.
func gatewayLimitFlags(cmd *cobra.Command, host *zone.HostConfig, l gateway.Limits) error {
	changed := cmd.Flags().Changed
	for _, f := range []struct {
		name  string
		value any
	}{
		{"gateway-read-timeout", l.HTTPReadTimeout},
		{"gateway-idle-timeout", l.HTTPIdleTimeout},
		{"gateway-conns-per-addr", l.MaxConnsPerAddr},
	} {
		if changed(f.name) && host.GatewayAddr == "" {
			return errcode.Config("--"+f.name, f.value, "is for --gateway: set --gateway too")
		}
	}
	if host.GatewayAddr == "" {
		return nil
	}
	switch {
	case l.HTTPReadTimeout <= 0:
		return errcode.Config("--gateway-read-timeout", l.HTTPReadTimeout, "must be positive")
	case l.HTTPIdleTimeout <= 0:
		return errcode.Config("--gateway-idle-timeout", l.HTTPIdleTimeout, "must be positive")
	case l.MaxConnsPerAddr < 0:
		return errcode.Config("--gateway-conns-per-addr", l.MaxConnsPerAddr, "must not be negative (0: no cap)")
	case l.MaxConnsPerAddr == 0:
		l.MaxConnsPerAddr = -1
	}
	host.GatewayLimits = l
	return nil
}

// dialEconomy connects the game's economy port to the economy nodes in
// etcd: a coord connection for their membership and econ's client over it.
// The returned func closes both.
func dialEconomy(ctx context.Context, etcd etcdFlags, mode, certDir, name string) (game.Economy, func(), error) {
	cfg := econ.ClientConfig{}
	switch mode {
	case "tls":
		if certDir == "" {
			return nil, nil, errcode.Config("--economy", mode, "needs --certs: this node's certificate is its identity to the economy nodes")
		}
		t, err := econ.ClientTLS(certDir, name)
		if err != nil {
			return nil, nil, errcode.Config("--certs", certDir, err.Error())
		}
		cfg.TLS = t
	case "plaintext":
		cfg.Insecure = true
	default:
		return nil, nil, errcode.Config("--economy", mode, `must be "tls" or "plaintext"`)
	}
	if len(etcd.endpoints) == 0 {
		return nil, nil, errcode.Config("--endpoints", "", "required: the etcd cluster to talk to (for example --endpoints http://127.0.0.1:2379)")
	}
	cl, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: etcd.endpoints, Prefix: etcd.prefix, DialTimeout: etcd.timeout})
	if err != nil {
		return nil, nil, err
	}
	cfg.Members = cl
	client, err := econ.NewClient(ctx, cfg)
	if err != nil {
		cl.Close()
		return nil, nil, err
	}
	return game.ClientEconomy{Client: client}, func() { client.Close(); cl.Close() }, nil
}

// zoneModule builds the module --module names. The game's configuration
// is checked for both: its runtime configuration (grid, step, budget) is
// the node's either way.
func zoneModule(cmd *cobra.Command, module string, gc game.Config, entities int) (zone.Module, error) {
	changed := cmd.Flags().Changed
	switch module {
	case "game":
		if changed("entities") {
			return nil, errcode.Config("--entities", entities, "is for --module wander")
		}
		if gc.Players == 0 { // game.Config's 0 is its default, 8
			return nil, errcode.Config("--players", gc.Players, "must be at least 1")
		}
		return game.NewModule(gc)
	case "wander":
		if changed("players") {
			return nil, errcode.Config("--players", gc.Players, "is for --module game")
		}
		if changed("no-bots") {
			return nil, errcode.Config("--no-bots", gc.NoBots, "is for --module game")
		}
		if err := gc.WithDefaults().Validate(); err != nil {
			return nil, err
		}
		if entities == 0 { // wander.Config's 0 is its default, 64
			return nil, errcode.Config("--entities", entities, "must be positive")
		}
		// Centre zero: the seams' crossing, where the game's start square is.
		return wander.New(wander.Config{Seed: gc.Seed, Entities: entities, Area: gc.Area})
	default:
		return nil, errcode.Config("--module", module, "must be game or wander")
	}
}

// indexRE matches the index of a list field ("Endpoints[2]").
var indexRE = regexp.MustCompile(`\[\d+\]$`)

// indexless returns a configuration error about one element of a list
// field as the same error about the field, whose flag takes the list.
func indexless(err error) error {
	var ce *errcode.ConfigError
	if !errors.As(err, &ce) || !indexRE.MatchString(ce.Field) {
		return err
	}
	return errcode.Config(indexRE.ReplaceAllString(ce.Field, ""), ce.Value, ce.Reason)
}

// zoneStatus prints what the host reports. Its methods run on the host's
// goroutine, which is also the command's.
type zoneStatus struct {
	out   io.Writer
	name  string
	every uint64 // ticks between status lines: about a second's worth
	start time.Time

	ticks     uint64
	last      zone.HostReport
	regions   int
	version   uint64 // the table version of the last line that named one
	maxGhosts int
	dashboard string // where the dashboard is served, if it is
}

func (s *zoneStatus) ready(r zone.HostReady) {
	s.regions = r.Regions
	s.version = r.TableVersion
	s.start = time.Now()
	metrics := ""
	if r.MetricsAddr != "" {
		metrics = ", metrics http://" + r.MetricsAddr + "/metrics"
	}
	if r.GatewayAddr != "" {
		metrics += ", gateway ws://" + r.GatewayAddr + "/ws (browser client http://" + r.GatewayAddr + "/)"
	}
	if s.dashboard != "" {
		metrics += ", dashboard http://" + s.dashboard + "/"
	}
	fmt.Fprintf(s.out, "%s: node %d, link %s%s, table version %d: owns %d of %d regions; peers connected: %s; missing: %s\n",
		r.Name, r.Node, r.LinkAddr, metrics, r.TableVersion, r.OwnedRegions, r.Regions, list(r.Connected), list(r.Missing))
}

func (s *zoneStatus) tick(r zone.HostReport) {
	s.ticks++
	s.last = r
	s.maxGhosts = max(s.maxGhosts, r.RenderGhosts)
	if r.TableVersion != s.version {
		s.version = r.TableVersion
		fmt.Fprintf(s.out, "%s: table version %d at tick %d: owns %d of %d regions\n", s.name, r.TableVersion, r.Tick, r.OwnedRegions, s.regions)
	}
	if s.ticks%s.every == 0 {
		h := r.Handoff
		fmt.Fprintf(s.out, "%s  tick %d  entities %d  simulated %d  frozen %d  regions %d  ghosts %d  peers %d/%d  batches %d  refused %d  handoffs sent %d acked %d adopted %d\n",
			s.name, r.Tick, r.Entities, r.Simulated, r.Frozen, r.OwnedRegions, r.RenderGhosts, r.Connected, r.Peers,
			r.Cluster.Batches, r.Cluster.Refused, h.Sent, h.Acked, h.Adopted)
	}
}

func (s *zoneStatus) summary() {
	r := s.last
	h := r.Handoff
	fmt.Fprintf(s.out, "%s: ran %d ticks in %s: entities %d (simulated %d, frozen %d), owned regions %d of %d (table version %d), "+
		"render ghosts %d (most %d), link batches %d (entries %d, snapshots %d), subscribes %d, "+
		"intents sent %d, refused %d, send errors %d, "+
		"handoffs sent %d, acked %d, refused %d, aborted %d, adopted %d, stale %d\n",
		s.name, s.ticks, time.Since(s.start).Round(time.Millisecond), r.Entities, r.Simulated, r.Frozen, r.OwnedRegions, s.regions, r.TableVersion,
		r.RenderGhosts, s.maxGhosts, r.Cluster.Batches, r.Cluster.Entries, r.Cluster.Snapshots, r.Cluster.Subscribes,
		r.Cluster.IntentsSent, r.Cluster.Refused, r.Cluster.SendErrors,
		h.Sent, h.Acked, h.Refused, h.Aborted, h.Adopted, h.Stale)
}

func list(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ", ")
}
