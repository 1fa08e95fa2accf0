package netting

import (
	"log/slog"
	"time"

	"github.com/shardwise/shardwise/errcode"
)

// Defaults of ClusterConfig, filled in by ClusterConfig.WithDefaults only.
const (
	DefaultEpochMaxAge   = 60 * time.Second
	DefaultMaxMovements  = 512
	DefaultChunkWidth    = 16
	DefaultSweepLimit    = 100
	DefaultSettleLease   = 30 * time.Second
	DefaultCommitTimeout = 30 * time.Second
)

// SweepConfig turns on settling in SweepOrphans.
type SweepConfig struct {
	// SettleOlderThan: an unsettled session whose last journal row is
	// strictly older than this (on the store's clock) is settled by the
	// sweep. Must be at least 2·EpochMaxAge (the epoch-age law).
	SettleOlderThan time.Duration
	// Limit caps the sessions one sweep looks at. 0 means DefaultSweepLimit.
	Limit int
}

// ClusterConfig configures one economy node.
type ClusterConfig struct {
	// NodeID is this node's id; it must appear in Nodes.
	NodeID string
	// Nodes is the full, duplicate-free node list every node of the cluster
	// is given (its order does not matter for placement).
	Nodes []string
	// EpochMaxAge: an open session older than this is settled and replaced.
	// 0 means DefaultEpochMaxAge.
	EpochMaxAge time.Duration
	// Sweep, when set, lets SweepOrphans settle orphans. nil: the sweep
	// only reports.
	Sweep *SweepConfig
	// Clock is the time source for ages. nil means the store's clock
	// (Store.Now) for sweep ages and the process's monotonic clock for the
	// durations of this node's own epochs. A non-nil Clock is used for both
	// and must agree with the store's clock (tests share one fake clock).
	Clock Clock

	// MaxMovements: an open session that has accepted this many movements
	// is settled and replaced. 0 means DefaultMaxMovements.
	MaxMovements int
	// ChunkWidth is stored with every session this node opens. 0 means
	// DefaultChunkWidth.
	ChunkWidth int
	// SettleLease is how long a settle claim keeps other settlers out if
	// its holder dies. 0 means DefaultSettleLease.
	SettleLease time.Duration
	// CommitTimeout bounds one group commit. 0 means DefaultCommitTimeout.
	CommitTimeout time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with every zero field that has a default filled in.
func (c ClusterConfig) WithDefaults() ClusterConfig {
	if c.EpochMaxAge == 0 {
		c.EpochMaxAge = DefaultEpochMaxAge
	}
	if c.MaxMovements == 0 {
		c.MaxMovements = DefaultMaxMovements
	}
	if c.ChunkWidth == 0 {
		c.ChunkWidth = DefaultChunkWidth
	}
	if c.SettleLease == 0 {
		c.SettleLease = DefaultSettleLease
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = DefaultCommitTimeout
	}
	if c.Sweep != nil && c.Sweep.Limit == 0 {
		sw := *c.Sweep
		sw.Limit = DefaultSweepLimit
		c.Sweep = &sw
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks c after defaults: every error is CONFIG.INVALID naming the
// field and value.
func (c ClusterConfig) Validate() error {
	c = c.WithDefaults()
	if len(c.Nodes) == 0 {
		return errcode.Config("Nodes", c.Nodes, "must list at least one node")
	}
	seen := make(map[string]bool, len(c.Nodes))
	for _, n := range c.Nodes {
		if n == "" {
			return errcode.Config("Nodes", c.Nodes, "contains an empty node id")
		}
		if seen[n] {
			return errcode.Config("Nodes", c.Nodes, "lists "+n+" twice")
		}
		seen[n] = true
	}
	if c.NodeID == "" || !seen[c.NodeID] {
		return errcode.Config("NodeID", c.NodeID, "is not in Nodes")
	}
	if c.EpochMaxAge < 0 {
		return errcode.Config("EpochMaxAge", c.EpochMaxAge, "must be positive")
	}
	if c.MaxMovements < 0 {
		return errcode.Config("MaxMovements", c.MaxMovements, "must be positive")
	}
	if c.ChunkWidth < 0 {
		return errcode.Config("ChunkWidth", c.ChunkWidth, "must be positive")
	}
	if c.SettleLease < 0 {
		return errcode.Config("SettleLease", c.SettleLease, "must be positive")
	}
	if c.CommitTimeout < 0 {
		return errcode.Config("CommitTimeout", c.CommitTimeout, "must be positive")
	}
	if c.Sweep != nil {
		if c.Sweep.Limit < 0 {
			return errcode.Config("Sweep.Limit", c.Sweep.Limit, "must be positive")
		}
		// The epoch-age law: a live epoch rotates within EpochMaxAge, and a
		// due rotation is seen up to one more EpochMaxAge later, so only a
		// session idle for 2·EpochMaxAge can be assumed dead. Equal is fine.
		if c.Sweep.SettleOlderThan < 2*c.EpochMaxAge {
			return errcode.Config("Sweep.SettleOlderThan", c.Sweep.SettleOlderThan,
				"must be at least 2 x EpochMaxAge ("+(2*c.EpochMaxAge).String()+"), the epoch-age law")
		}
	}
	return nil
}
