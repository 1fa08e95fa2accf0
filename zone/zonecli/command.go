package zonecli

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/dashboard"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/zone/zonehost"
)

// DefaultCluster is the cluster id a gateway accepts when no --cluster is
// given (the default of "shardwise token" and "shardwise certs" too).
const DefaultCluster = "local"

// Config configures the command NewCommand builds.
type Config struct {
	// Use is the command's name: "zone" under shardwise; a main of its
	// own passes its program's name. Default: the name the process was
	// started by.
	Use string
	// Short and Long are the help. Defaults: a description of a zone
	// node hosting the modules.
	Short, Long string
	// Modules are what the node can run; the first is --module's
	// default. --module is a flag only when there are several. At least
	// one is required.
	Modules []Module
}

// hostFlagOf names the flag behind each HostConfig field the command's
// flags set.
var hostFlagOf = map[string]string{
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
	"HostConfig.GatewayResumeWindow":           "--gateway-resume-window",
	"HostConfig.Runtime.TickInterval":          "--tick",
	"HostConfig.Runtime.MaterialiseBudget":     "--materialise-budget",
}

// Main runs the command, hosting modules, as the whole program: the
// process's arguments, its interrupt and SIGTERM (the first stops the
// node gracefully, with its summary; a second, while that runs, ends the
// process), and exit status 1 on an error, printed with its code.
func Main(modules ...Module) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	cmd := NewCommand(Config{Modules: modules})
	// main prints the error once, with its code; a refused flag does not
	// bury it under the usage.
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, cmd.Name()+":", err)
		os.Exit(1)
	}
}

// NewCommand returns the zone command hosting cfg.Modules. It panics on a
// Config no run could use (no module, a module without a name or New, two
// with one name): a programming error of the main that builds it.
func NewCommand(cfg Config) *cobra.Command {
	if len(cfg.Modules) == 0 {
		panic("zonecli: no module to host")
	}
	seen := map[string]bool{}
	for _, m := range cfg.Modules {
		if m.Name == "" || m.New == nil || seen[m.Name] {
			panic(fmt.Sprintf("zonecli: module %q: a unique Name and a New are required", m.Name))
		}
		seen[m.Name] = true
	}
	if cfg.Use == "" {
		cfg.Use = filepath.Base(os.Args[0])
	}
	if cfg.Short == "" {
		cfg.Short = "Run one zone node hosting " + names(cfg.Modules) + ", with its peers found through etcd"
	}
	if cfg.Long == "" {
		cfg.Long = defaultLong(cfg.Use)
	}
	var (
		ef        etcdFlags
		host      zonehost.HostConfig
		module    string
		seed      uint64
		tick      time.Duration
		budget    int
		ticks     int
		noHandoff bool
		verbose   bool
		cluster   string
		loginPub  string
		dashAddr  string
		gwLimits  gateway.Limits
	)
	// Each module's flags on a set of its own, so that the command knows
	// whose a flag typed is.
	sets := make([]*pflag.FlagSet, len(cfg.Modules))
	for i, m := range cfg.Modules {
		sets[i] = pflag.NewFlagSet(m.Name, pflag.ContinueOnError)
		if m.Flags != nil {
			m.Flags(sets[i])
		}
	}
	cmd := &cobra.Command{
		Use:   cfg.Use,
		Short: cfg.Short,
		Long:  cfg.Long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mi := slices.IndexFunc(cfg.Modules, func(m Module) bool { return m.Name == module })
			if mi < 0 {
				return errcode.WithCode(errcode.Config("--module", module, "must be "+names(cfg.Modules)))
			}
			mod := cfg.Modules[mi]
			if err := onlyFlagsOf(cmd.Flags(), cfg.Modules, sets, mi); err != nil {
				return errcode.WithCode(err)
			}
			if ticks < 0 {
				return errcode.WithCode(errcode.Config("--ticks", ticks, "must not be negative (0 runs until interrupted)"))
			}
			if _, _, err := net.SplitHostPort(dashAddr); dashAddr != "" && err != nil {
				return errcode.WithCode(errcode.Config("--dashboard", dashAddr, "must be host:port (port 0 picks a free one)"))
			}
			if tick <= 0 {
				return errcode.WithCode(errcode.Config("--tick", tick, "must be positive"))
			}
			if host.PeerWait == 0 {
				host.PeerWait = -1 // the help: 0 does not wait
			}
			if err := gatewayLimitFlags(cmd, &host, gwLimits); err != nil {
				return errcode.WithCode(err)
			}
			flagOf := maps.Clone(hostFlagOf)
			maps.Copy(flagOf, mod.FlagOf)
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			host.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			host.Coord = coord.ClientConfig{Endpoints: ef.endpoints, Prefix: ef.prefix, DialTimeout: ef.timeout}
			hosted, err := mod.New(cmd.Context(), Node{
				Name:              host.Name,
				CertDir:           host.CertDir,
				Coord:             host.Coord,
				Seed:              seed,
				TickInterval:      tick,
				MaterialiseBudget: budget,
				Gateway:           host.GatewayAddr != "",
				Logger:            host.Logger,
				Changed:           cmd.Flags().Changed,
			})
			if hosted.Close != nil {
				defer hosted.Close()
			}
			if err != nil {
				return errcode.WithCode(errcode.RenameFields(errcode.Indexless(err), flagOf))
			}
			if hosted.Module == nil {
				return fmt.Errorf("zonecli: module %q: New returned no module", mod.Name)
			}
			if c, ok := hosted.Module.(io.Closer); ok {
				// After the runtime's last Step (the runtime does not
				// close its module).
				defer c.Close()
			}
			out := cmd.OutOrStdout()
			every := max(1, uint64(time.Second/tick))
			st := &status{out: out, name: host.Name, every: every}
			host.Module = hosted.Module
			host.Runtime = hosted.Runtime
			host.Runtime.TickInterval = tick
			host.Runtime.MaterialiseBudget = budget
			host.Runtime.NoHandoff = noHandoff
			host.Runtime.WorldSeed = seed
			if host.GatewayAddr != "" || cmd.Flags().Changed("cluster") {
				host.Cluster = cluster
			}
			if loginPub != "" {
				pub, err := readLoginPub("--login-pub", loginPub)
				if err != nil {
					return errcode.WithCode(err)
				}
				host.LoginKeys = []ed25519.PublicKey{pub}
			} else if host.GatewayAddr != "" {
				return errcode.WithCode(errcode.Config("--login-pub", loginPub, `required with --gateway: the login public key file ("shardwise token keygen")`))
			}
			host.Ticks = uint64(ticks)
			host.OnReady = st.ready
			host.OnTick = st.tick
			if dashAddr != "" {
				col := dashboard.NewCollector(dashboard.CollectorConfig{Logger: host.Logger, Kinds: hosted.Kinds})
				srv, err := dashboard.Listen("--dashboard", dashAddr, col, dashboard.HandlerConfig{}, host.Logger)
				if err != nil {
					return errcode.WithCode(err)
				}
				defer func() { _ = srv.Close() }()
				st.dashboard = srv.Addr()
				host.OnTick = func(r zonehost.HostReport) {
					st.tick(r)
					col.Zone(r)
				}
			}
			err = zonehost.Host(cmd.Context(), host)
			if st.ticks > 0 {
				st.summary()
			}
			return errcode.WithCode(errcode.RenameFields(errcode.Indexless(err), flagOf))
		},
	}
	ef.register(cmd)
	f := cmd.Flags()
	f.StringVar(&host.Name, "name", "", "this node's name: its member name, its owner name in the region table, its certificate (required)")
	f.StringVar(&host.CertDir, "certs", "", `directory written by "shardwise certs" holding this node's certificate (required)`)
	f.StringVar(&host.ListenAddr, "listen", "127.0.0.1:0", "address the node link listens on (port 0: any free port)")
	f.StringVar(&host.AdvertiseAddr, "advertise", "", "link address published for peers (default: the one listened on)")
	f.StringVar(&host.MetricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics and the probes /healthz and /readyz (port 0: any free port; default: not served)")
	f.StringVar(&dashAddr, "dashboard", "", "serve the live dashboard of this node's view (its regions, entities, ghosts and handoffs) at http://ADDR/ (port 0: any free port; default: not served)")
	f.DurationVar(&host.TTL, "ttl", 0, "lease TTL, whole seconds: the node is fenced this long after etcd stops hearing from it (0: 10s)")
	f.BoolVar(&host.NoFailover, "no-failover", false, "do not campaign to be the failover controller, which gives a dead zone node's regions to their standbys (on every node: failover only by hand, with regions apply)")
	f.DurationVar(&host.PeerWait, "peer-wait", 10*time.Second, "before the first tick, wait this long for the table's other nodes to be connected (0 or negative: do not wait)")
	f.IntVar(&ticks, "ticks", 0, "ticks to run; 0 runs until interrupted")
	f.DurationVar(&tick, "tick", 50*time.Millisecond, "the fixed step (every node of a world must use the same)")
	f.Uint64Var(&seed, "seed", 1, "world seed: every node of a world must use the same")
	if len(cfg.Modules) > 1 {
		f.StringVar(&module, "module", cfg.Modules[0].Name, "the zone module: "+usages(cfg.Modules))
	} else {
		module = cfg.Modules[0].Name
	}
	f.IntVar(&budget, "materialise-budget", 0, "columns materialised per tick (0: default 64)")
	f.StringVar(&host.GatewayAddr, "gateway", "", "serve players at ADDR: the WebSocket at ws://ADDR/ws, the browser client at http://ADDR/ (port 0: any free port; default: no gateway)")
	f.StringVar(&cluster, "cluster", DefaultCluster, "--gateway: the cluster id login tokens must name")
	f.StringVar(&loginPub, "login-pub", "", `--gateway: the login public key file ("shardwise token keygen --pub"); required with --gateway`)
	f.StringVar(&host.DirectoryURL, "directory", "", "--gateway: the session directory every gateway shares, redis://HOST:PORT (default: in memory, for a node alone in its table)")
	f.StringVar(&host.WorldStoreURL, "world-store", "", "--gateway: where players are kept, sqlite:///PATH or postgres://… (default: in memory, for a node alone in its table)")
	f.DurationVar(&gwLimits.HTTPReadTimeout, "gateway-read-timeout", gateway.DefaultHTTPReadTimeout, "--gateway: longest time to read one HTTP request (a WebSocket upgrade until it is upgraded)")
	f.DurationVar(&gwLimits.HTTPIdleTimeout, "gateway-idle-timeout", gateway.DefaultHTTPIdleTimeout, "--gateway: close an HTTP keep-alive connection idle this long between requests")
	f.DurationVar(&host.GatewayResumeWindow, "gateway-resume-window", gateway.DefaultResumeWindow, "--gateway: how long after its session was last renewed a client whose socket dropped may resume it (docs/protocol.md)")
	f.IntVar(&gwLimits.MaxConnsPerAddr, "gateway-conns-per-addr", gateway.DefaultMaxConnsPerAddr, "--gateway: connections one remote IP address may hold open at once; more are closed as accepted (0: no cap)")
	f.BoolVar(&noHandoff, "no-handoff", false, "never hand entities over: they stay with this node wherever they walk, and a region move leaves them here")
	f.BoolVar(&verbose, "verbose", false, "log node events (joins, peers, table versions) to stderr")
	for _, s := range sets {
		f.AddFlagSet(s) // skips a name already added: shown once
	}
	return cmd
}

// onlyFlagsOf refuses a flag typed that belongs to other modules than
// modules[run] only, and gives the module that runs, as typed, the flags
// it shares by name with a module whose flag the command holds.
func onlyFlagsOf(typed *pflag.FlagSet, modules []Module, sets []*pflag.FlagSet, run int) error {
	var err error
	typed.Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		var owners []Module
		for i, s := range sets {
			if s.Lookup(f.Name) != nil {
				owners = append(owners, modules[i])
			}
		}
		if len(owners) == 0 {
			return // the command's own
		}
		own := sets[run].Lookup(f.Name)
		if own == nil {
			err = errcode.Config("--"+f.Name, typedValue(f), "is for --module "+names(owners))
			return
		}
		if own != f {
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				err = own.Value.(pflag.SliceValue).Replace(sv.GetSlice())
			} else {
				err = sets[run].Set(f.Name, f.Value.String())
			}
		}
	})
	return err
}

// typedValue is a flag's value as the type it holds, so that an error
// prints it as the user typed it (5, true, "x", 1.5s).
func typedValue(f *pflag.Flag) any {
	s := f.Value.String()
	switch f.Value.Type() {
	case "bool":
		if v, err := strconv.ParseBool(s); err == nil {
			return v
		}
	case "int", "int8", "int16", "int32", "int64":
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return v
		}
	case "uint", "uint8", "uint16", "uint32", "uint64":
		if v, err := strconv.ParseUint(s, 10, 64); err == nil {
			return v
		}
	case "float32", "float64":
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			return v
		}
	case "duration":
		if v, err := time.ParseDuration(s); err == nil {
			return v
		}
	}
	return s
}

// names is "a", "a or b", "a, b or c".
func names(ms []Module) string {
	var ns []string
	for _, m := range ms {
		ns = append(ns, m.Name)
	}
	return orList(ns)
}

// usages is names with each module's usage in parentheses.
func usages(ms []Module) string {
	var ns []string
	for _, m := range ms {
		if m.Usage != "" {
			ns = append(ns, m.Name+" ("+m.Usage+")")
		} else {
			ns = append(ns, m.Name)
		}
	}
	return orList(ns)
}

func orList(ns []string) string {
	if len(ns) < 2 {
		return strings.Join(ns, "")
	}
	return strings.Join(ns[:len(ns)-1], ", ") + " or " + ns[len(ns)-1]
}

func defaultLong(use string) string {
	return use + " runs one zone node as its own process: it registers in etcd as --name\n" +
		"(role zone, publishing its link address), serves the node link with the\n" +
		"certificate --certs holds for --name (see \"shardwise certs\"), and simulates\n" +
		"the regions the region table gives it (\"shardwise regions new\" and\n" +
		"\"shardwise regions apply\" write and store one). Every other zone member is a\n" +
		"link peer; the entities they simulate near this node's viewers arrive as\n" +
		"render ghosts, and an entity that walks past a border is handed over.\n" +
		"\n" +
		"It prints a ready line, a status line about once a second, and a summary at\n" +
		"the end: after --ticks ticks, on interrupt, or when the node loses its lease\n" +
		"(exit status 1). --metrics serves Prometheus metrics and the probes /healthz\n" +
		"and /readyz; --dashboard the live dashboard; --gateway serves players\n" +
		"(docs/protocol.md; the module must support them)."
}

// gatewayLimitFlags sets host.GatewayLimits from the --gateway-* flags
// typed: each only with --gateway, a 0 timeout refused (HostConfig would
// read it as the default), a cap of 0 meaning no cap as the help says.
func gatewayLimitFlags(cmd *cobra.Command, host *zonehost.HostConfig, l gateway.Limits) error {
	changed := cmd.Flags().Changed
	for _, f := range []struct {
		name  string
		value any
	}{
		{"gateway-read-timeout", l.HTTPReadTimeout},
		{"gateway-idle-timeout", l.HTTPIdleTimeout},
		{"gateway-conns-per-addr", l.MaxConnsPerAddr},
		{"gateway-resume-window", host.GatewayResumeWindow},
	} {
		if changed(f.name) && host.GatewayAddr == "" {
			return errcode.Config("--"+f.name, f.value, "is for --gateway: set --gateway too")
		}
	}
	if host.GatewayAddr == "" {
		host.GatewayResumeWindow = 0 // the flag's default: no gateway, no window
		return nil
	}
	switch {
	case host.GatewayResumeWindow <= 0:
		return errcode.Config("--gateway-resume-window", host.GatewayResumeWindow, "must be positive")
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
