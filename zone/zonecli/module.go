package zonecli

import (
	"context"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/zone"
)

// Module is one module the command can host: its name for --module, its
// own flags, and how to build it once the flags are parsed.
type Module struct {
	// Name is what --module takes. Required, unique in a Config.
	Name string
	// Usage says in a few words what the module is; --module's help
	// lists it after the name.
	Usage string
	// Flags, if set, registers the module's own flags. A flag name two
	// modules register is shown once and given, as typed, to whichever
	// module runs; a flag of another module than the one that runs is
	// refused ("is for --module NAME").
	Flags func(fs *pflag.FlagSet)
	// FlagOf names the flag behind each field the module's configuration
	// errors name (errcode.ConfigError.Field, "Players" → "--players"),
	// from New and from the module's Setup inside the node, so that the
	// user reads the flag typed, not a Go field.
	FlagOf map[string]string
	// New builds the module for one node, after the node's flags are
	// checked and before any I/O of the command's own. Required.
	New func(ctx context.Context, n Node) (Hosted, error)
}

// Node is what the command's own flags say about the node, for
// Module.New.
type Node struct {
	// Name is the node's name (--name); CertDir its certificates (--certs).
	Name    string
	CertDir string
	// Coord is how the node reaches etcd (--endpoints, --prefix,
	// --timeout), for a module that finds other services there.
	Coord coord.ClientConfig
	// Seed is the world seed (--seed), the same on every node of a world.
	Seed uint64
	// TickInterval is the fixed step (--tick), positive.
	TickInterval time.Duration
	// MaterialiseBudget is --materialise-budget (0: the runtime's default).
	MaterialiseBudget int
	// Gateway reports whether the node serves players (--gateway): the
	// module must then support them (zone.Runtime.SetPlayers).
	Gateway bool
	// Logger is the node's logger (records at Info with --verbose).
	Logger *slog.Logger
	// Changed reports whether a flag, by name without dashes, was typed.
	Changed func(name string) bool
}

// Hosted is a module built for one node.
type Hosted struct {
	// Module is the module the node runs. Required.
	Module zone.Module
	// Runtime is the base runtime configuration (zonehost.HostConfig.Runtime):
	// the grid, which must be the region table's, the bands, the view.
	// The command sets TickInterval, MaterialiseBudget, WorldSeed and
	// NoHandoff from its flags. Zero: zone's defaults (cells'
	// default grid, the one "shardwise regions new" writes tables over).
	Runtime zone.Config
	// Kinds, if set, names what an entity is on the dashboard
	// (dashboard.CollectorConfig.Kinds); nil: every entity alike.
	Kinds func(rt *zone.Runtime, id ecs.ID) string
	// Close, if set, runs once the node has returned, after a Module that
	// is an io.Closer is closed (the runtime does not close its module).
	Close func()
}
