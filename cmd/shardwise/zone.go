package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/zone"
)

// newZoneCmd is "shardwise zone": one node of the reference game as its
// own process (zone.Host), printing a status line about once a second.
func newZoneCmd() *cobra.Command {
	var (
		etcd    etcdFlags
		host    zone.HostConfig
		gc      game.Config
		ticks   int
		verbose bool
	)
	// The configuration fields the flags below set, and those flags.
	flagOf := map[string]string{
		"HostConfig.Coord.Endpoints":           "--endpoints",
		"HostConfig.Coord.Prefix":              "--prefix",
		"HostConfig.Coord.DialTimeout":         "--timeout",
		"HostConfig.Name":                      "--name",
		"HostConfig.CertDir":                   "--certs",
		"HostConfig.ListenAddr":                "--listen",
		"HostConfig.AdvertiseAddr":             "--advertise",
		"HostConfig.TTL":                       "--ttl",
		"HostConfig.Runtime.TickInterval":      "--tick",
		"HostConfig.Runtime.MaterialiseBudget": "--materialise-budget",
		"Seed":                                 "--seed",
		"Players":                              "--players",
		"Area":                                 "--area",
		"TickInterval":                         "--tick",
		"MaterialiseBudget":                    "--materialise-budget",
	}
	cmd := &cobra.Command{
		Use:   "zone",
		Short: "Run one zone node of the reference game, with its peers found through etcd",
		Long: "zone runs one node of the reference game as its own process: it registers in\n" +
			"etcd as --name (role zone, publishing its link address), serves the node link\n" +
			"with the certificate --certs holds for --name (see \"shardwise certs\"), and\n" +
			"simulates the regions the region table gives it (see \"shardwise regions\n" +
			"apply\"; the table's grid must be the game's: 128 km torus, 8 km regions).\n" +
			"Every other zone member is a link peer; the entities they simulate near this\n" +
			"node's players arrive as render ghosts. Every node runs the game from the same\n" +
			"--seed and --players, each spawning the players whose homes it owns.\n" +
			"It prints a status line about once a second and a summary at the end: after\n" +
			"--ticks ticks, on interrupt, or when the node loses its lease (exit status 1).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ticks < 0 {
				return withCode(errcode.Config("--ticks", ticks, "must not be negative (0 runs until interrupted)"))
			}
			mod, err := game.NewModule(gc)
			if err != nil {
				return withCode(renameToFlags(err, flagOf))
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
			host.Ticks = uint64(ticks)
			host.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			host.OnReady = st.ready
			host.OnTick = st.tick
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
	f.DurationVar(&host.TTL, "ttl", 0, "lease TTL, whole seconds: the node is fenced this long after etcd stops hearing from it (0: 10s)")
	f.DurationVar(&host.PeerWait, "peer-wait", 10*time.Second, "before the first tick, wait this long for the table's other nodes to be connected (negative: do not wait)")
	f.IntVar(&ticks, "ticks", 0, "ticks to run; 0 runs until interrupted")
	f.DurationVar(&gc.TickInterval, "tick", 50*time.Millisecond, "the fixed step (every node of a world must use the same)")
	f.Uint64Var(&gc.Seed, "seed", 1, "world seed: every node of a world must use the same")
	f.IntVar(&gc.Players, "players", 64, "players of the whole world (a master and a pet each), each on the node owning its home")
	f.Float64Var(&gc.Area, "area", 2000, "side in metres of the start square, centred on the seams' crossing")
	f.IntVar(&gc.MaterialiseBudget, "materialise-budget", 0, "columns materialised per tick (0: default 64)")
	f.BoolVar(&verbose, "verbose", false, "log node events (joins, peers, table versions) to stderr")
	return cmd
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
	maxGhosts int
}

func (s *zoneStatus) ready(r zone.HostReady) {
	s.regions = r.Regions
	s.start = time.Now()
	fmt.Fprintf(s.out, "%s: node %d, link %s, table version %d: owns %d of %d regions; peers connected: %s; missing: %s\n",
		r.Name, r.Node, r.LinkAddr, r.TableVersion, r.OwnedRegions, r.Regions, list(r.Connected), list(r.Missing))
}

func (s *zoneStatus) tick(r zone.HostReport) {
	s.ticks++
	s.last = r
	s.maxGhosts = max(s.maxGhosts, r.RenderGhosts)
	if s.ticks%s.every == 0 {
		fmt.Fprintf(s.out, "%s  tick %d  entities %d  regions %d  ghosts %d  peers %d/%d  batches %d  refused %d\n",
			s.name, r.Tick, r.Entities, r.OwnedRegions, r.RenderGhosts, r.Connected, r.Peers, r.Cluster.Batches, r.Cluster.Refused)
	}
}

func (s *zoneStatus) summary() {
	r := s.last
	fmt.Fprintf(s.out, "%s: ran %d ticks in %s: entities %d, owned regions %d of %d (table version %d), "+
		"render ghosts %d (most %d), link batches %d (entries %d, snapshots %d), subscribes %d, "+
		"intents sent %d, refused %d, send errors %d\n",
		s.name, s.ticks, time.Since(s.start).Round(time.Millisecond), r.Entities, r.OwnedRegions, s.regions, r.TableVersion,
		r.RenderGhosts, s.maxGhosts, r.Cluster.Batches, r.Cluster.Entries, r.Cluster.Snapshots, r.Cluster.Subscribes,
		r.Cluster.IntentsSent, r.Cluster.Refused, r.Cluster.SendErrors)
}

func list(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ", ")
}
