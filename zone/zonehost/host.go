package zonehost

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/directory/redisdir"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/internal/health"
	"github.com/shardwise/shardwise/internal/nodehttp"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/nodename"
	"github.com/shardwise/shardwise/webclient"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/worldstore/sqlworld"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonecoord"
	"github.com/shardwise/shardwise/zone/zonegate"
	"github.com/shardwise/shardwise/zone/zonelink"
)

// HostConfig configures Host: one zone node in its own process. Zero
// fields take the defaults documented on them, filled by withDefaults.
type HostConfig struct {
	// Coord is how the node reaches etcd. Host connects with it and closes
	// the client when it returns. Endpoints is required.
	Coord coord.ClientConfig
	// Name is the node's name (nodename rules): its member name, the owner
	// name region tables use, and the id its link certificate names.
	// Required.
	Name string
	// CertDir holds the cluster CA and the node's certificate and key, as
	// link.WriteClusterCerts writes them (link.LoadIdentity(CertDir,
	// Name)). Required.
	CertDir string
	// ListenAddr is where the link listens. Default "127.0.0.1:0" (a free
	// port on the loopback: a cluster on one machine).
	ListenAddr string
	// AdvertiseAddr is the link address published in coord (Addrs["link"])
	// for peers to dial. Default: the address the listener got, which is
	// right unless ListenAddr is a wildcard such as ":7100".
	AdvertiseAddr string
	// MetricsAddr, if set, is where Host serves the node's Prometheus
	// metrics over HTTP, at /metrics: the zonecoord.Ownership's gauges
	// (shardwise_zone_owned_regions, _table_version, _fenced), the last
	// tick (_tick), the node's entities by state (_entities{state=
	// "simulated"|"frozen"}) and the simulated ones by region
	// (_region_entities{region="17"}), its render ghosts (_render_ghosts),
	// its handoffs (_handoffs_total{event="sent"|"acked"|"refused"|
	// "aborted"|"adopted"|"stale"}), the intents it could not deliver
	// (_intents_dropped_total{reason="lapsed"|"hold_full"|"stale"|
	// "unconfirmed"|"unadopted"|"unsent"}), the link's (shardwise_link_*, per
	// peer and stream), the gateway's with GatewayAddr (shardwise_gateway_*)
	// and the Go runtime's and the process's. They are set after every tick. The address served is
	// published in coord as Addrs["metrics"] and reported in HostReady.
	// The same address serves the probes /healthz (alive) and /readyz
	// (ready; docs/operators.md says when). Port 0 picks a free one.
	// Default "": not served.
	MetricsAddr string
	// GatewayAddr, if set, is where the node serves players (the gateway
	// role, package gateway): the client protocol's WebSocket at /ws and
	// the browser client (webclient.Handler) at /, on one address, so that
	// the page and its socket are same-origin. The address served is
	// published in coord as Addrs["gateway"] and reported in HostReady.
	// Port 0 picks a free one. The module must support players
	// (SetPlayers). Default "": no gateway.
	GatewayAddr string
	// GatewayLimits bound each client connection of the gateway
	// (gateway.Config.Limits), and the gateway's port: its HTTP read and
	// keep-alive idle timeouts and the connections one remote address may
	// hold open (gateway.Limits.HTTPReadTimeout, HTTPIdleTimeout,
	// MaxConnsPerAddr). Zero fields take gateway's defaults. Only with
	// GatewayAddr.
	GatewayLimits gateway.Limits
	// GatewayResumeWindow is how long a client whose socket dropped may
	// resume its session with its resume credential, counted from the
	// session's last renewal (gateway.Config.ResumeWindow). Default
	// gateway.DefaultResumeWindow (60 s). Only with GatewayAddr.
	GatewayResumeWindow time.Duration
	// Cluster is the cluster id the login tokens must name
	// (logintoken.VerifierConfig.Cluster). Required with GatewayAddr.
	Cluster string
	// LoginKeys are the login service's Ed25519 public keys the gateway
	// trusts; the node never holds a private key. Required with
	// GatewayAddr.
	LoginKeys []ed25519.PublicKey
	// DirectoryURL is the session directory every gateway of the cluster
	// shares (sessions, their epochs, single-use token ids):
	// "redis://[user:password@]host:port[/db]" (Valkey or Redis, package
	// directory/redisdir). Default "": an in-process directory.Memory,
	// which Host refuses, once it holds the region table, if the table
	// names another node: two gateways with two directories would accept
	// one token twice and never displace each other's sessions.
	DirectoryURL string
	// WorldStoreURL is where players are kept between sessions and the
	// terrain's edits (worldstore/sqlworld.Open: "sqlite:///abs/world.db",
	// which the processes of one machine may share, or "postgres://…").
	// Host sets Runtime.WorldStore from it. Default "": an in-process
	// worldstore.Memory, refused like the directory when the table names
	// another node (a player saved on one node would be unknown to the
	// others).
	WorldStoreURL string
	// Directory, if set, is the session directory the gateway uses, given
	// by a caller that runs several nodes in one process (package demo)
	// and shares one instance among them; it must also be the token
	// single-use store (logintoken.SingleUse), as both directory
	// implementations are. Host neither opens nor closes it. Exclusive
	// with DirectoryURL; with it set, the table may name other nodes.
	Directory SharedDirectory
	// WorldStore, if set, is the world store, given and shared the same
	// way; Host does not close it. Exclusive with WorldStoreURL.
	WorldStore worldstore.Store
	// TTL is the lease's time to live, whole seconds (zonecoord.JoinConfig.TTL).
	// Default 0: coord's default (10s).
	TTL time.Duration
	// PeerWait bounds the wait, before the first tick, for every other
	// node the held region table names to be a live member connected over
	// the link. The runtime sends a chunk subscription once, when its
	// clients first need the chunk, and the link refuses messages to a
	// peer it does not know: a node that ticks before its neighbours are
	// known would never see their entities in the chunks its clients
	// already hold. After PeerWait the node runs anyway, without the
	// missing ones (logged). Measured on Clock. Default 10s; negative: do
	// not wait.
	PeerWait time.Duration
	// NoFailover turns the node's failover controller off. By default
	// every zone node campaigns to be the cluster's failover controller
	// (zonecoord.RunFailover, with the node's TTL), and the one elected gives the
	// regions of a zone node whose lease ends to their standbys. The
	// cluster fails over as long as one node campaigns: set it on every
	// node to re-own regions only by hand (shardwise regions apply).
	// Default false: failover on.
	NoFailover bool
	// Module is the game the node runs. Required.
	Module zone.Module
	// Runtime is the base runtime configuration (a game's RuntimeConfig):
	// Grid, Bands, View, MaterialiseBudget, TickInterval, Clock, Logger.
	// Host sets Name, Node (the coord node id), Territory (the
	// zonecoord.Ownership), Transport, Lease, Accept and WorldStore; those must be left
	// zero (Name may equal HostConfig.Name). The Grid must be the region table's.
	// Runtime.Clock nil: Clock. Runtime.Logger nil: Logger.
	Runtime zone.Config
	// Ticks stops the node after that many ticks (Host returns nil).
	// Default 0: run until ctx ends or the node is fenced.
	Ticks uint64
	// Clock paces the ticks (one every Runtime.TickInterval) and the
	// peer wait. Default clock.Real().
	Clock clock.Clock
	// Logger receives the host's records; the link, the ownership and
	// the runtime get it too, with the node's name. Default: discard.
	Logger *slog.Logger
	// OnReady, if set, is called once, just before the first tick, from
	// the goroutine that called Host.
	OnReady func(HostReady)
	// OnTick, if set, is called after every tick from the goroutine that
	// called Host (the one that owns the runtime). It holds back the next
	// tick while it runs.
	OnTick func(HostReport)
}

// HostReady describes the node as it starts ticking.
type HostReady struct {
	Name string
	// Node is the node number coord leased the node (the entity-id node
	// part); Lease the lease its messages carry.
	Node  int
	Lease int64
	// LinkAddr is the link address published in coord.
	LinkAddr string
	// MetricsAddr is the address the metrics are served on (host:port,
	// path /metrics), or "" when HostConfig.MetricsAddr is not set.
	MetricsAddr string
	// GatewayAddr is the address players connect to (host:port; the
	// socket at /ws, the browser client at /), or "" when
	// HostConfig.GatewayAddr is not set.
	GatewayAddr string
	// TableVersion and OwnedRegions describe the table held; Regions is
	// the grid's region count.
	TableVersion          uint64
	OwnedRegions, Regions int
	// Connected and Missing are the other nodes the table names: connected
	// over the link, and not (PeerWait ran out), each sorted.
	Connected, Missing []string
}

// HostReport describes one tick of a hosted node.
type HostReport struct {
	// Report is the runtime's report of the tick.
	zone.Report
	// Simulated and Frozen count the node's own entities with a position:
	// those it simulates, and those frozen in a handoff (sent and not yet
	// acked, or taken over and not yet past the source's last tick).
	// Simulation ghosts are in neither.
	Simulated, Frozen int
	// Handoff is the runtime's handoff counters since it started.
	Handoff zone.HandoffStats
	// RenderGhosts is how many entities of other nodes the node holds.
	RenderGhosts int
	// OwnedRegions is how many regions the held table gives the node, at
	// TableVersion.
	OwnedRegions int
	TableVersion uint64
	// Peers and Connected count link peers: known (live zone members with
	// a link address) and connected now.
	Peers, Connected int
	// Cluster is the runtime's link counters since it started.
	Cluster zone.ClusterStats
	// Took is the wall time of the tick's Step.
	Took time.Duration
	// Sessions is how many client sessions the node's gateway serves (0
	// without a gateway).
	Sessions int
	// Runtime is the node's runtime, for an observer that reads more than
	// the report (package demo's census). It may be used only during the
	// OnTick call, which runs on the runtime's goroutine.
	Runtime *zone.Runtime
}

// SharedDirectory is a session directory that is also the login tokens'
// single-use store (HostConfig.Directory).
type SharedDirectory interface {
	directory.Directory
	logintoken.SingleUse
}

func (c HostConfig) withDefaults() HostConfig {
	if c.ListenAddr == "" {
		c.ListenAddr = "127.0.0.1:0"
	}
	if c.PeerWait == 0 {
		c.PeerWait = 10 * time.Second
	}
	c.Clock = clock.OrReal(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Runtime.Clock == nil {
		c.Runtime.Clock = c.Clock
	}
	if c.Runtime.Logger == nil {
		c.Runtime.Logger = c.Logger
	}
	return c
}

// Validate reports the first field that cannot work, after defaults,
// without any I/O: a command can check its flags before connecting.
func (c HostConfig) Validate() error {
	c = c.withDefaults()
	if err := c.Coord.Validate(); err != nil {
		var ce *errcode.ConfigError
		if errors.As(err, &ce) {
			return errcode.Config("HostConfig.Coord."+strings.TrimPrefix(ce.Field, "ClientConfig."), ce.Value, ce.Reason)
		}
		return err
	}
	if err := nodename.Check("HostConfig.Name", c.Name); err != nil {
		return err
	}
	if c.CertDir == "" {
		return errcode.Config("HostConfig.CertDir", c.CertDir, "required: the directory holding the cluster CA and this node's certificate")
	}
	if _, _, err := net.SplitHostPort(c.ListenAddr); err != nil {
		return errcode.Config("HostConfig.ListenAddr", c.ListenAddr, "must be host:port (port 0 picks a free one)")
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return errcode.Config("HostConfig.MetricsAddr", c.MetricsAddr, "must be host:port (port 0 picks a free one)")
		}
	}
	if err := c.validateGateway(); err != nil {
		return err
	}
	if c.AdvertiseAddr != "" {
		host, port, err := net.SplitHostPort(c.AdvertiseAddr)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return errcode.Config("HostConfig.AdvertiseAddr", c.AdvertiseAddr, "must be host:port with a port peers can dial")
		}
	}
	// zonecoord.JoinConfig.TTL's rule, checked here because zonecoord.JoinConfig.Validate needs
	// a connected client.
	if c.TTL != 0 && (c.TTL < time.Second || c.TTL%time.Second != 0) {
		return errcode.Config("HostConfig.TTL", c.TTL, "must be 0 (coord's default) or a whole number of seconds, at least 1s")
	}
	if c.Module == nil {
		return errcode.Config("HostConfig.Module", nil, "required: the game the node runs")
	}
	rc := c.Runtime
	switch {
	case rc.Name != "" && rc.Name != c.Name:
		return errcode.Config("HostConfig.Runtime.Name", rc.Name, "is set by the host to HostConfig.Name "+strconv.Quote(c.Name))
	case rc.Node != 0:
		return errcode.Config("HostConfig.Runtime.Node", rc.Node, "is set by the host: the node id coord leases it")
	case rc.Territory != nil:
		return errcode.Config("HostConfig.Runtime.Territory", "set", "is set by the host: the node's zonecoord.Ownership")
	case rc.Transport != nil:
		return errcode.Config("HostConfig.Runtime.Transport", rc.Transport.ID(), "is set by the host: the link it builds from HostConfig.CertDir")
	case rc.Lease != 0:
		return errcode.Config("HostConfig.Runtime.Lease", rc.Lease, "is set by the host: the node's coord lease")
	case rc.Accept != nil:
		return errcode.Config("HostConfig.Runtime.Accept", "set", "is set by the host: the fence from coord's membership")
	case rc.LivePeers != nil:
		return errcode.Config("HostConfig.Runtime.LivePeers", "set", "is set by the host: the live members from coord's membership")
	case rc.WorldStore != nil:
		return errcode.Config("HostConfig.Runtime.WorldStore", "set", "is set by the host from HostConfig.WorldStoreURL")
	}
	rc.Name = c.Name
	if err := rc.Validate(); err != nil {
		var ce *errcode.ConfigError
		if errors.As(err, &ce) {
			return errcode.Config("HostConfig.Runtime."+strings.TrimPrefix(ce.Field, "Config."), ce.Value, ce.Reason)
		}
		return err
	}
	return nil
}

// validateGateway checks the gateway role's fields: all or none.
func (c HostConfig) validateGateway() error {
	if c.GatewayAddr == "" {
		switch {
		case c.Cluster != "":
			return errcode.Config("HostConfig.Cluster", c.Cluster, "is for the gateway: set HostConfig.GatewayAddr too")
		case len(c.LoginKeys) != 0:
			return errcode.Config("HostConfig.LoginKeys", len(c.LoginKeys), "are for the gateway: set HostConfig.GatewayAddr too")
		case c.DirectoryURL != "":
			return errcode.Config("HostConfig.DirectoryURL", redactURL(c.DirectoryURL), "is for the gateway: set HostConfig.GatewayAddr too")
		case c.WorldStoreURL != "":
			return errcode.Config("HostConfig.WorldStoreURL", redactURL(c.WorldStoreURL), "is for the gateway: set HostConfig.GatewayAddr too")
		case c.Directory != nil:
			return errcode.Config("HostConfig.Directory", "set", "is for the gateway: set HostConfig.GatewayAddr too")
		case c.WorldStore != nil:
			return errcode.Config("HostConfig.WorldStore", "set", "is for the gateway: set HostConfig.GatewayAddr too")
		case c.GatewayLimits != (gateway.Limits{}):
			return errcode.Config("HostConfig.GatewayLimits", "set", "are for the gateway: set HostConfig.GatewayAddr too")
		case c.GatewayResumeWindow != 0:
			return errcode.Config("HostConfig.GatewayResumeWindow", c.GatewayResumeWindow, "is for the gateway: set HostConfig.GatewayAddr too")
		}
		return nil
	}
	if err := c.GatewayLimits.Validate(); err != nil {
		var ce *errcode.ConfigError
		if errors.As(err, &ce) {
			return errcode.Config("HostConfig.GatewayLimits."+strings.TrimPrefix(ce.Field, "Config.Limits."), ce.Value, ce.Reason)
		}
		return err
	}
	if err := gateway.CheckResumeWindow(c.GatewayResumeWindow); err != nil {
		var ce *errcode.ConfigError
		if errors.As(err, &ce) {
			return errcode.Config("HostConfig.GatewayResumeWindow", ce.Value, ce.Reason)
		}
		return err
	}
	if _, _, err := net.SplitHostPort(c.GatewayAddr); err != nil {
		return errcode.Config("HostConfig.GatewayAddr", c.GatewayAddr, "must be host:port (port 0 picks a free one)")
	}
	if c.Cluster == "" || len(c.Cluster) > logintoken.MaxClusterLen {
		return errcode.Config("HostConfig.Cluster", c.Cluster, fmt.Sprintf("must be 1..%d bytes: the cluster id login tokens name", logintoken.MaxClusterLen))
	}
	if len(c.LoginKeys) == 0 {
		return errcode.Config("HostConfig.LoginKeys", 0, "at least one login public key is required")
	}
	for _, k := range c.LoginKeys {
		if len(k) != ed25519.PublicKeySize {
			return errcode.Config("HostConfig.LoginKeys", len(k), "a key is not an Ed25519 public key (32 bytes)")
		}
	}
	if c.Directory != nil && c.DirectoryURL != "" {
		return errcode.Config("HostConfig.Directory", "set", "is exclusive with HostConfig.DirectoryURL: set one")
	}
	if c.WorldStore != nil && c.WorldStoreURL != "" {
		return errcode.Config("HostConfig.WorldStore", "set", "is exclusive with HostConfig.WorldStoreURL: set one")
	}
	if c.DirectoryURL != "" {
		if _, err := redis.ParseURL(c.DirectoryURL); err != nil {
			return errcode.Config("HostConfig.DirectoryURL", redactURL(c.DirectoryURL), `must be "redis://host:port[/db]" or "rediss://…"`)
		}
	}
	if u := c.WorldStoreURL; u != "" && !strings.HasPrefix(u, "sqlite://") && !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		return errcode.Config("HostConfig.WorldStoreURL", redactURL(u), `must start with "sqlite://", "postgres://" or "postgresql://"`)
	}
	return nil
}

// redactURL hides a password in a URL that is going into an error message.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if i := strings.Index(raw, "://"); i >= 0 {
		return raw[:i+3] + "…"
	}
	return raw
}

// peerPoll is how often the peer wait looks at the link.
const peerPoll = 10 * time.Millisecond

// Host runs one zone node until ctx ends (it returns nil), until
// cfg.Ticks ticks have run (nil), or until the node is fenced (an error
// matching zone.ErrFenced). In order, it:
//
//  1. loads the node's certificate from CertDir and listens on
//     ListenAddr (it serves peers only once the runtime exists, so no
//     peer's message meets a link without the runtime's handlers: a peer
//     that dials earlier waits in the listener's backlog); with
//     MetricsAddr, serves the metrics from then on (they read zero until
//     the first tick); with GatewayAddr, listens there too (served from
//     step 4 on) and opens the session directory (DirectoryURL) and the
//     world store (WorldStoreURL); the metrics address serves /healthz
//     and /readyz too (docs/operators.md), ready only from step 5 on;
//  2. connects to coord and joins (zonecoord.Join, role "zone"), publishing the link
//     address as Addrs["link"], the metrics address as Addrs["metrics"]
//     and the gateway's as Addrs["gateway"];
//     unless NoFailover, it campaigns to be the failover controller
//     (zonecoord.RunFailover) in a goroutine it owns, until the node stops or is
//     fenced;
//  3. follows coord's membership in one goroutine it owns: every other
//     live zone member with a link address is a link peer (removed when
//     it leaves), and its lease is the one the runtime's fence (Accept)
//     lets through;
//  4. waits for the first region table (with a gateway, refusing
//     in-process stores if it names another node), builds the runtime
//     (Territory: the zonecoord.Ownership; WorldStore: the world store), starts
//     serving the link and, with a gateway, serves players: the gateway
//     (its World zonegate.World of the runtime, its sessions' node number the
//     coord node id) at /ws and the browser client at /;
//  5. waits up to PeerWait for the table's other nodes (HostConfig.PeerWait
//     says why), calls OnReady;
//  6. ticks the runtime every TickInterval on Clock, on a schedule fixed
//     at the first tick (a slow tick is caught up on; once the loop is
//     more than one interval behind, the missed ticks are dropped, as
//     time.Ticker drops them), calling OnTick after each.
//
// Before it returns, everything it started has stopped, in this order: the
// gateway (every socket is closed, GATEWAY.SHUTDOWN, and its session
// leaves the world; unless the node is fenced, two more ticks apply the
// leaves, so the players it simulates are saved), the runtime, the world
// store and the directory, the membership follower, the link, the failover
// controller (resigned, so another node's takes over at once), the
// zonecoord.Ownership (which revokes the lease, so the name is free at once), the
// coord client, the metrics server.
//
// A Host is the whole lifetime of one node, so it is a call, not an
// object: nothing outlives it, and ctx is its only stop. The runtime is
// owned by the calling goroutine (the gateway reaches it through
// zone.Runtime.Post); OnTick is how to watch it.
func Host(ctx context.Context, cfg HostConfig) (err error) {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger

	var (
		l      *link.Node
		lis    net.Listener
		served bool
		cl     *coord.Client
		own    *zonecoord.Ownership
		peers  *peerSet
		rt     *zone.Runtime
		ms     *metricsServer
		hg     *hostGateway
		fo     *hostFailover
		hh     = &hostHealth{gateway: cfg.GatewayAddr != ""}
	)
	defer func() {
		hh.stopping.Store(true) // /readyz says so while the rest stops
		if hg != nil {
			hg.stop() // before the runtime: its sessions leave the world
			if rt != nil && !rt.Fenced() && (own == nil || own.Err() == nil) {
				// Two more ticks apply the leaves: the players this node
				// simulates are saved as they logged out.
				rt.Step()
				rt.Step()
			}
		}
		if rt != nil {
			_ = rt.Close()
		}
		if hg != nil {
			hg.closeStores() // after the runtime, whose saver writes to the store
		}
		if peers != nil {
			peers.stop() // before the link: it adds and removes the link's peers
		}
		if l != nil {
			_ = l.Close() // stops the server, which closes lis
		}
		if lis != nil && !served {
			_ = lis.Close()
		}
		if fo != nil {
			fo.stop() // before the lease goes: another controller takes over at once
		}
		if own != nil {
			_ = own.Close()
		}
		if cl != nil {
			_ = cl.Close()
		}
		if ms != nil {
			ms.stop()
		}
		// ctx ending is a stop, not a failure, wherever it happens.
		if err != nil && ctx.Err() != nil && !errors.Is(err, zone.ErrFenced) {
			err = nil
		}
	}()

	// The certificate is read again at every new link connection, so a
	// rotated one is presented without a restart.
	certs, err := link.NewCertReloader(cfg.CertDir, cfg.Name)
	if err != nil {
		return errcode.Config("HostConfig.CertDir", cfg.CertDir, err.Error())
	}
	cert, err := certs.Certificate()
	if err != nil {
		return errcode.Config("HostConfig.CertDir", cfg.CertDir, err.Error())
	}
	if l, err = link.New(link.Config{Certificate: *cert, ClusterCA: certs.Pool(), Reload: certs.Certificate, Logger: log}); err != nil {
		return errcode.Config("HostConfig.CertDir", cfg.CertDir, fmt.Sprintf("node %q: %v", cfg.Name, err))
	}
	if l.ID() != cfg.Name {
		return errcode.Config("HostConfig.CertDir", cfg.CertDir, fmt.Sprintf("the certificate of node %q names node %q", cfg.Name, l.ID()))
	}
	if lis, err = net.Listen("tcp", cfg.ListenAddr); err != nil {
		return errcode.Config("HostConfig.ListenAddr", cfg.ListenAddr, err.Error())
	}
	addr := cfg.AdvertiseAddr
	if addr == "" {
		addr = lis.Addr().String()
	}
	addrs := map[string]string{"link": addr}
	var (
		hm  *hostMetrics
		reg *prometheus.Registry
	)
	if cfg.MetricsAddr != "" {
		hm, reg = newHostMetrics(), prometheus.NewRegistry()
		reg.MustRegister(hm.collectors()...)
		reg.MustRegister(l.Metrics()) // the link's frames per peer and stream
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		if ms, err = serveMetrics(cfg.MetricsAddr, reg, hh.check, log); err != nil {
			return err
		}
		addrs["metrics"] = ms.addr
	}
	if cfg.GatewayAddr != "" {
		if hg, err = openGateway(ctx, cfg); err != nil {
			return err
		}
		addrs["gateway"] = hg.addr
	}

	if cfg.Coord.Logger == nil {
		cfg.Coord.Logger = log
	}
	if cl, err = coord.Connect(ctx, cfg.Coord); err != nil {
		return err
	}
	own, err = zonecoord.Join(ctx, zonecoord.JoinConfig{Coord: cl, Name: cfg.Name, Addrs: addrs, TTL: cfg.TTL, Logger: log})
	if err != nil {
		return err
	}
	hh.cl.Store(cl)
	hh.own.Store(own)
	if !cfg.NoFailover {
		// Its retry pause is against etcd, on etcd's (real) time, not a
		// tick: cfg.Clock, a test's fake clock, would hold it.
		fo = startFailover(own.Context(), zonecoord.FailoverConfig{Coord: cl, Name: cfg.Name, TTL: cfg.TTL, Logger: log})
	}
	if reg != nil {
		reg.MustRegister(own.Collectors()...)
	}
	p := &peerSet{self: cfg.Name, link: l, log: log, leases: map[string]int64{}, addrs: map[string]string{}}
	if err := p.follow(ctx, cl); err != nil {
		return err
	}
	peers = p

	if err := own.WaitVersion(ctx, 1); err != nil {
		return err
	}
	rc := cfg.Runtime
	rc.Name, rc.Node, rc.Territory, rc.Accept, rc.LivePeers = cfg.Name, int(own.NodeID()), own, peers.accept, peers.live
	rc.Transport = zonelink.NewLinkTransport(l) // the runtime closes it; the link is closed after the runtime
	if hg != nil {
		if err := hg.checkShared(cfg, own.Table().Nodes()); err != nil {
			return err
		}
		rc.WorldStore = hg.store
	}
	if rt, err = zone.New(rc, cfg.Module); err != nil {
		_ = rc.Transport.Close()
		return err
	}
	if hg != nil {
		if err := hg.start(cfg, rt, rc.Node, reg); err != nil {
			return err
		}
		hh.gw.Store(hg.g)
	}
	if err := l.Serve(lis); err != nil {
		return err
	}
	served = true

	connected, missing, err := waitPeers(ctx, cfg, own, l)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		log.Warn("zone: host: starting without peers the region table names", "node", cfg.Name, "missing", missing, "waited", cfg.PeerWait)
	}
	ready := HostReady{
		Name: cfg.Name, Node: rc.Node, Lease: own.Lease(), LinkAddr: addr, MetricsAddr: addrs["metrics"], GatewayAddr: addrs["gateway"],
		TableVersion: own.Version(), OwnedRegions: len(own.OwnedRegions()), Regions: own.Table().Grid().Regions(),
		Connected: connected, Missing: missing,
	}
	log.Info("zone: host: ticking", "node", cfg.Name, "node_id", ready.Node, "link", addr, "metrics", ready.MetricsAddr, "gateway", ready.GatewayAddr,
		"table_version", ready.TableVersion, "owned", ready.OwnedRegions, "connected", connected)
	hh.ticking.Store(true)
	if cfg.OnReady != nil {
		cfg.OnReady(ready)
	}
	return tick(ctx, cfg, rt, own, l, hm, hg)
}

// tick runs the tick loop: fixed steps on cfg.Clock, scheduled from the
// first, so a slow tick is caught up on by the next ones, down to one
// interval behind. After each tick it reports to OnTick and sets hm (nil:
// no metrics).
func tick(ctx context.Context, cfg HostConfig, rt *zone.Runtime, own *zonecoord.Ownership, l *link.Node, hm *hostMetrics, hg *hostGateway) error {
	interval := rt.World().TickInterval()
	perRegion := map[cells.RegionID]int{}
	next := cfg.Clock.Now().Add(interval)
	t := cfg.Clock.NewTimer(interval)
	defer t.Stop()
	for n := uint64(0); cfg.Ticks == 0 || n < cfg.Ticks; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-own.Fenced():
			return fencedErr(own)
		case <-t.C():
		}
		began := time.Now()
		rep := rt.Step()
		took := time.Since(began)
		if rt.Fenced() {
			return fencedErr(own)
		}
		if cfg.OnTick != nil || hm != nil {
			hr := HostReport{Report: rep, RenderGhosts: rt.RenderGhosts(), OwnedRegions: len(own.OwnedRegions()),
				TableVersion: own.Version(), Cluster: rt.ClusterStats(), Handoff: rt.HandoffStats(), Took: took}
			hr.Simulated, hr.Frozen = census(rt, perRegion)
			if hg != nil && hg.g != nil {
				hr.Sessions = hg.g.Sessions()
			}
			for _, p := range l.Peers() {
				hr.Peers++
				if l.Connected(p) {
					hr.Connected++
				}
			}
			if hm != nil {
				hm.update(hr, perRegion)
			}
			if cfg.OnTick != nil {
				hr.Runtime = rt
				cfg.OnTick(hr)
			}
		}
		now := cfg.Clock.Now()
		next = next.Add(interval)
		if next.Sub(now) < -interval {
			next = now // more than a tick behind: drop the backlog
		}
		t.Reset(max(next.Sub(now), 0))
	}
	return nil
}

// census counts the node's own positioned entities: simulated, and
// frozen in a handoff; perRegion is cleared and refilled with the
// simulated ones by the region they stand in.
func census(rt *zone.Runtime, perRegion map[cells.RegionID]int) (simulated, frozen int) {
	clear(perRegion)
	grid := rt.Grid()
	rt.Positions().Each(func(id ecs.ID, p *zone.Position) {
		switch {
		case rt.Simulated(id):
			simulated++
			perRegion[grid.RegionOf(p.Pos)]++
		case rt.Frozen().Has(id) && !rt.Ghosts().Has(id):
			frozen++
		}
	})
	return simulated, frozen
}

// hostHealth is what a zone node's /readyz reads: set by Host as it goes,
// read by the metrics server's goroutines.
type hostHealth struct {
	own      atomic.Pointer[zonecoord.Ownership]
	cl       atomic.Pointer[coord.Client]
	gw       atomic.Pointer[gateway.Gateway]
	ticking  atomic.Bool // OnReady is next: every step before the first tick done
	stopping atomic.Bool // Host is returning
	gateway  bool        // the node serves a gateway (HostConfig.GatewayAddr)
}

// check is the node's readiness (docs/operators.md): joined, holding the
// table version stored in etcd, its lease live, past its start (the
// runtime built, the link served, the peer wait over) and, with a
// gateway, the gateway accepting. The table version is read from etcd
// on each call: the node holds every version its watch delivered, and
// this says whether the watch is keeping up.
func (h *hostHealth) check(ctx context.Context) (string, error) {
	own := h.own.Load()
	switch {
	case h.stopping.Load():
		return "", errors.New("stopping")
	case own == nil:
		return "", errors.New("joining: not a member yet")
	case own.Err() != nil:
		return "", fmt.Errorf("fenced: %w", own.Err())
	case own.Version() == 0:
		return "", errors.New("joining: no region table held yet")
	case !h.ticking.Load():
		return "", fmt.Errorf("joining: starting (table version %d held)", own.Version())
	}
	if h.gateway {
		if g := h.gw.Load(); g == nil || !g.Accepting() {
			return "", errors.New("gateway not accepting")
		}
	}
	held := own.Version()
	cur, err := h.cl.Load().Regions(ctx)
	if err != nil {
		return "", fmt.Errorf("table version unknown (holds %d): %w", held, err)
	}
	if cur.Version() > held {
		return "", fmt.Errorf("behind: holds table version %d, etcd has %d", held, cur.Version())
	}
	return fmt.Sprintf("table version %d, %d of %d regions", held, len(own.OwnedRegions()), own.Table().Grid().Regions()), nil
}

// metricsServer serves a registry over HTTP until stop.
type metricsServer struct {
	addr string
	srv  *http.Server
	done chan struct{}
}

// serveMetrics listens on addr and serves reg at /metrics, and the
// probes /healthz and /readyz (ready: the check), in a goroutine that
// stop joins.
func serveMetrics(addr string, reg *prometheus.Registry, ready health.Check, log *slog.Logger) (*metricsServer, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errcode.Config("HostConfig.MetricsAddr", addr, err.Error())
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	health.Handle(mux, ready)
	m := &metricsServer{
		addr: lis.Addr().String(),
		srv:  nodehttp.NewServer(mux, nodehttp.Timeouts{}),
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("zone: host: metrics server", "addr", m.addr, "err", err)
		}
	}()
	return m, nil
}

// stop closes the listener and every connection, and waits for the
// server's goroutine.
func (m *metricsServer) stop() {
	_ = m.srv.Close()
	<-m.done
}

// hostGateway is a hosted node's gateway role: its listener and HTTP
// server, the gateway, and the directory and world store it opened.
type hostGateway struct {
	addr string
	lis  net.Listener
	log  *slog.Logger

	dir      directory.Directory
	closeDir func() error
	shared   bool // dir and store are shared with other processes or nodes
	store    worldstore.Store
	// keepStore: store is HostConfig.WorldStore, the caller's to close.
	keepStore bool

	g    *gateway.Gateway
	srv  *http.Server
	done chan struct{} // closed when the server's goroutine returns; nil until start
}

// openGateway listens on GatewayAddr and opens the directory and the
// world store. Nothing is served until start.
func openGateway(ctx context.Context, cfg HostConfig) (_ *hostGateway, err error) {
	h := &hostGateway{log: cfg.Logger}
	defer func() {
		if err != nil {
			h.stop()
			h.closeStores()
		}
	}()
	if h.lis, err = net.Listen("tcp", cfg.GatewayAddr); err != nil {
		return nil, errcode.Config("HostConfig.GatewayAddr", cfg.GatewayAddr, err.Error())
	}
	h.addr = h.lis.Addr().String()
	if cfg.WorldStore != nil {
		h.store, h.keepStore = cfg.WorldStore, true
	} else if cfg.WorldStoreURL != "" {
		st, err := sqlworld.Open(ctx, cfg.WorldStoreURL)
		if err != nil {
			return nil, errcode.Config("HostConfig.WorldStoreURL", redactURL(cfg.WorldStoreURL), err.Error())
		}
		h.store = st
	} else {
		h.store = worldstore.NewMemory(nil)
	}
	if cfg.Directory != nil {
		h.dir = cfg.Directory
	} else if cfg.DirectoryURL != "" {
		opts, err := redis.ParseURL(cfg.DirectoryURL)
		if err != nil {
			return nil, errcode.Config("HostConfig.DirectoryURL", redactURL(cfg.DirectoryURL), err.Error())
		}
		client := redis.NewClient(opts)
		h.closeDir = client.Close
		if err := client.Ping(ctx).Err(); err != nil {
			return nil, errcode.Config("HostConfig.DirectoryURL", redactURL(cfg.DirectoryURL), "unreachable: "+err.Error())
		}
		if h.dir, err = redisdir.New(redisdir.Config{Client: client}); err != nil {
			return nil, err
		}
	} else if h.dir, err = directory.NewMemory(directory.MemoryConfig{}); err != nil {
		return nil, err
	}
	h.shared = (cfg.DirectoryURL != "" || cfg.Directory != nil) && (cfg.WorldStoreURL != "" || cfg.WorldStore != nil)
	return h, nil
}

// checkShared refuses in-process stores on a node that is not alone in
// its table (HostConfig.DirectoryURL says why).
func (h *hostGateway) checkShared(cfg HostConfig, nodes []string) error {
	if h.shared {
		return nil
	}
	var others []string
	for _, n := range nodes {
		if n != cfg.Name {
			others = append(others, n)
		}
	}
	if len(others) == 0 {
		return nil
	}
	why := fmt.Sprintf("required: the region table names other nodes (%s), whose gateways must share ", strings.Join(others, ", "))
	if cfg.DirectoryURL == "" && cfg.Directory == nil {
		return errcode.Config("HostConfig.DirectoryURL", "", why+"the session directory (redis://host:port)")
	}
	return errcode.Config("HostConfig.WorldStoreURL", "", why+"the world store (sqlite:///path/world.db or postgres://…)")
}

// start builds the gateway over the runtime and serves it.
func (h *hostGateway) start(cfg HostConfig, rt *zone.Runtime, node int, reg *prometheus.Registry) error {
	world, err := zonegate.World(rt)
	if err != nil {
		return errcode.Config("HostConfig.GatewayAddr", cfg.GatewayAddr, "the module cannot have players: "+err.Error())
	}
	v, err := logintoken.NewVerifier(logintoken.VerifierConfig{
		Cluster: cfg.Cluster, Audience: gateway.Audience, Keys: cfg.LoginKeys, SingleUse: h.dir,
	})
	if err != nil {
		return err
	}
	if h.g, err = gateway.New(gateway.Config{
		Name: cfg.Name, Node: directory.NodeID(node), Directory: h.dir, Verifier: v, World: world,
		Geometry: rt.Geometry(), TickHz: max(1, int(time.Second/rt.World().TickInterval())),
		Limits: cfg.GatewayLimits, ResumeWindow: cfg.GatewayResumeWindow, Logger: cfg.Logger,
	}); err != nil {
		return err
	}
	zonegate.SetGateway(rt, h.g)
	if reg != nil {
		reg.MustRegister(h.g.Metrics().Collectors()...)
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", h.g)
	mux.Handle("/", webclient.Handler())
	// The port's HTTP timeouts and its cap per remote address: an idle
	// keep-alive connection or one address's flood holds no descriptors
	// for long (gateway.Limits).
	h.srv = h.g.HTTPServer(mux)
	h.done = make(chan struct{})
	lis := h.g.Listener(h.lis)
	go func() {
		defer close(h.done)
		if err := h.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.log.Warn("zone: host: gateway server", "addr", h.addr, "err", err)
		}
	}()
	return nil
}

// stop closes every client socket (the gateway tells each client the
// node is stopping) and the server, and waits for them. Idempotent.
func (h *hostGateway) stop() {
	if h.g != nil {
		_ = h.g.Close() // every session leaves the world (Post)
	}
	if h.srv != nil {
		_ = h.srv.Close() // closes the listener
		<-h.done
	} else if h.lis != nil {
		_ = h.lis.Close()
	}
	h.g, h.srv, h.lis = nil, nil, nil
}

// closeStores closes what openGateway opened.
func (h *hostGateway) closeStores() {
	if h.store != nil && !h.keepStore {
		_ = h.store.Close()
	}
	h.store = nil
	if h.closeDir != nil {
		_ = h.closeDir()
		h.closeDir = nil
	}
}

// waitPeers waits, polling on cfg.Clock, until every other node the held
// table names is connected over the link, or PeerWait has passed.
func waitPeers(ctx context.Context, cfg HostConfig, own *zonecoord.Ownership, l *link.Node) (connected, missing []string, err error) {
	look := func() {
		connected, missing = connected[:0], missing[:0]
		for _, n := range own.Table().Nodes() {
			switch {
			case n == cfg.Name:
			case l.Connected(n):
				connected = append(connected, n)
			default:
				missing = append(missing, n)
			}
		}
		slices.Sort(connected)
		slices.Sort(missing)
	}
	look()
	if cfg.PeerWait < 0 || len(missing) == 0 {
		return connected, missing, nil
	}
	deadline := cfg.Clock.Now().Add(cfg.PeerWait)
	t := cfg.Clock.NewTimer(peerPoll)
	defer t.Stop()
	for len(missing) > 0 && cfg.Clock.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, nil, context.Cause(ctx)
		case <-own.Fenced():
			return nil, nil, fencedErr(own)
		case <-t.C():
		}
		look()
		t.Reset(peerPoll)
	}
	return connected, missing, nil
}

// fencedErr is the error Host returns for a fence: the zonecoord.Ownership's, which
// is a *zone.FencedError unless something closed the registration under it.
func fencedErr(own *zonecoord.Ownership) error {
	err := own.Err()
	if errors.Is(err, zone.ErrFenced) {
		return err
	}
	return &zone.FencedError{Node: own.Name(), TableVersion: own.Version(), Cause: err}
}

// peerSet follows coord's membership for one node: the link's peers and
// the live lease of each, for the runtime's fence.
type peerSet struct {
	self string
	link *link.Node
	log  *slog.Logger

	mu     sync.Mutex
	leases map[string]int64 // name → live lease, zone members other than self

	addrs map[string]string // name → link address added to the link; follower only

	cancel context.CancelFunc
	done   chan struct{}
}

// follow opens the membership watch (the current members arrive first)
// and starts the one goroutine that applies it. stop joins it.
func (p *peerSet) follow(ctx context.Context, cl *coord.Client) error {
	wctx, cancel := context.WithCancel(ctx)
	events, err := cl.WatchMembers(wctx)
	if err != nil {
		cancel()
		return err
	}
	// The live members are known before the runtime's first tick (its
	// LivePeers must not be empty while the watch's first events are on
	// their way): listed and applied here, after the watch's own snapshot,
	// so the events that follow lead to the same set.
	members, err := cl.Members(wctx)
	if err != nil {
		cancel()
		for range events { // the watch closes once wctx ends
		}
		return err
	}
	for _, m := range members {
		p.apply(coord.MembershipEvent{Kind: coord.MemberJoined, Member: m})
	}
	p.cancel, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		for ev := range events {
			p.apply(ev)
		}
	}()
	return nil
}

func (p *peerSet) stop() {
	p.cancel()
	<-p.done // the watch closes its channel once wctx ends
}

// apply takes one membership event. A member is a peer while it is a live
// zone member with a link address; a new incarnation (a restart) replaces
// the lease, and the peer too if its address changed.
func (p *peerSet) apply(ev coord.MembershipEvent) {
	m := ev.Member
	if m.Role != zonecoord.Role || m.Name == p.self {
		return
	}
	p.mu.Lock()
	if ev.Kind == coord.MemberLeft {
		if p.leases[m.Name] != m.Lease {
			p.mu.Unlock()
			return // a newer incarnation already replaced it
		}
		delete(p.leases, m.Name)
	} else {
		p.leases[m.Name] = m.Lease
	}
	p.mu.Unlock()

	want := ""
	if ev.Kind != coord.MemberLeft {
		want = m.Addrs["link"]
	}
	have, ok := p.addrs[m.Name]
	if ok && have == want {
		return
	}
	if ok {
		if err := p.link.RemovePeer(m.Name); err != nil {
			p.log.Warn("zone: host: remove peer", "node", p.self, "peer", m.Name, "err", err)
		}
		delete(p.addrs, m.Name)
		p.log.Info("zone: host: peer removed", "node", p.self, "peer", m.Name, "addr", have, "event", ev.Kind)
	}
	if want == "" {
		return
	}
	if err := p.link.AddPeer(m.Name, want); err != nil {
		p.log.Warn("zone: host: add peer", "node", p.self, "peer", m.Name, "addr", want, "err", err)
		return
	}
	p.addrs[m.Name] = want
	p.log.Info("zone: host: peer added", "node", p.self, "peer", m.Name, "addr", want, "lease", m.Lease)
}

// live is the runtime's view of the live zone members other than this
// node, each with its lease (zone.Config.LivePeers).
func (p *peerSet) live() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.leases)
}

// accept is the runtime's fence: a message from peer is applied only while
// the lease it carries is the peer's live lease.
func (p *peerSet) accept(peer string, lease int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return lease != 0 && p.leases[peer] == lease
}

// hostFailover is a Host's failover controller: zonecoord.RunFailover in a goroutine
// the host owns, stopped and joined by stop.
type hostFailover struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startFailover runs zonecoord.RunFailover until ctx ends or stop; a controller
// that ends on an error (the client closed under it) is logged, not
// retried: the node is stopping.
func startFailover(ctx context.Context, cfg zonecoord.FailoverConfig) *hostFailover {
	ctx, cancel := context.WithCancel(ctx)
	f := &hostFailover{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		if err := zonecoord.RunFailover(ctx, cfg); err != nil {
			cfg.Logger.Warn("zone: failover controller stopped", "node", cfg.Name, "err", err)
		}
	}()
	return f
}

// stop ends the controller (resigning a leadership) and waits for it.
func (f *hostFailover) stop() {
	f.cancel()
	<-f.done
}
