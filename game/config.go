package game

import (
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/entityid"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

// Config configures a Game. Zero fields take the defaults documented on
// them (filled in by WithDefaults).
type Config struct {
	// Seed makes the run reproducible: same seed, same world, same bytes.
	Seed uint64
	// Node is the entity id node part, 0–255. Default 0.
	Node int
	// Torus is the world geometry. Default torus.DefaultConfig() (128 km).
	Torus torus.Config
	// RegionEdge is the side of a region in metres (cells.GridConfig);
	// it must divide both torus extents. Default 8000.
	RegionEdge int
	// Players is how many bot players (master + pet each, accounts 1 to
	// Players) log in at start. Default 8; NoBots for none.
	Players int
	// NoBots starts the world with no bot players: only clients (through
	// the gateway role) play.
	NoBots bool
	// PartySize groups consecutive accounts into parties. Default 3.
	PartySize int
	// Area is the side, in metres, of the square centred on the torus
	// origin (0, 0) where players start; centring it there puts both seams
	// through the middle of the play area. Default 1000.
	Area float64
	// Roam is how far from home, in metres, a master's waypoints lie.
	// Default 150.
	Roam float64
	// DenChance is the probability that a column is a den cell. Default 0.04.
	DenChance float64
	// DenCapacity is how many mobs a den keeps stocked. Default 4.
	DenCapacity int
	// StockRadius: a den stocks only while a player master is this close
	// (metres, wrap-aware). Default 160.
	StockRadius float64
	// NoticeRadius: a mob notices a player this close. Default 20.
	NoticeRadius float64
	// WanderChance is the probability per tick that an idle mob starts a
	// new wander leg. Default 0.025 (a pause of 2 s on average); 1 keeps
	// every mob moving (the benchmark's "moving entities").
	WanderChance float64
	// AttackRange is the reach of a melee attack. Default 2.5.
	AttackRange float64
	// MaterialiseBudget caps columns materialised per tick. Default 64.
	MaterialiseBudget int
	// TickInterval is the fixed step. Default 50 ms (20 Hz).
	TickInterval time.Duration
	// Clock is the wall clock, read once, by New: entity ids count from
	// that boot reading plus the ticks run, so a node restarted with the
	// same node part mints ids above those of its previous run. nil means
	// clock.Real(); tests inject a clock.Fake to get the same ids twice.
	Clock clock.Clock
	// Economy is the game's money and goods (econ.go): loot, shops and
	// trades, recorded on an economy cluster. Its Ledger nil: none.
	Economy EconomyConfig
}

// WithDefaults returns c with zero fields filled in.
func (c Config) WithDefaults() Config {
	c.Torus = c.Torus.WithDefaults()
	if c.RegionEdge == 0 {
		c.RegionEdge = cells.DefaultRegionEdge
	}
	if c.Players == 0 {
		c.Players = 8
	}
	if c.PartySize == 0 {
		c.PartySize = 3
	}
	if c.Area == 0 {
		c.Area = 1000
	}
	if c.Roam == 0 {
		c.Roam = 150
	}
	if c.DenChance == 0 {
		c.DenChance = 0.04
	}
	if c.DenCapacity == 0 {
		c.DenCapacity = 4
	}
	if c.StockRadius == 0 {
		c.StockRadius = 160
	}
	if c.NoticeRadius == 0 {
		c.NoticeRadius = 20
	}
	if c.WanderChance == 0 {
		c.WanderChance = 0.025
	}
	if c.AttackRange == 0 {
		c.AttackRange = 2.5
	}
	if c.MaterialiseBudget == 0 {
		c.MaterialiseBudget = 64
	}
	if c.TickInterval == 0 {
		c.TickInterval = 50 * time.Millisecond
	}
	c.Clock = clock.OrReal(c.Clock)
	c.Economy = c.Economy.withDefaults()
	return c
}

// Validate checks c after defaults.
func (c Config) Validate() error {
	if err := c.Torus.Validate(); err != nil {
		return err
	}
	if err := (cells.GridConfig{World: c.Torus, RegionEdge: c.RegionEdge}).Validate(); err != nil {
		return err
	}
	switch {
	case c.Node < 0 || c.Node > entityid.MaxNode:
		return errcode.Config("Node", c.Node, "must be within [0, 255]")
	case c.Players < 0:
		return errcode.Config("Players", c.Players, "must not be negative")
	case c.PartySize < 1:
		return errcode.Config("PartySize", c.PartySize, "must be at least 1")
	case c.Area <= 0 || c.Area > float64(c.Torus.Width) || c.Area > float64(c.Torus.Height):
		return errcode.Config("Area", c.Area, "must be positive and fit the torus")
	case c.Roam <= 0:
		return errcode.Config("Roam", c.Roam, "must be positive")
	case c.DenChance < 0 || c.DenChance > 1:
		return errcode.Config("DenChance", c.DenChance, "must be within [0, 1]")
	case c.DenCapacity < 1:
		return errcode.Config("DenCapacity", c.DenCapacity, "must be at least 1")
	case c.StockRadius <= 0:
		return errcode.Config("StockRadius", c.StockRadius, "must be positive")
	case c.NoticeRadius <= 0:
		return errcode.Config("NoticeRadius", c.NoticeRadius, "must be positive")
	case c.WanderChance < 0 || c.WanderChance > 1:
		return errcode.Config("WanderChance", c.WanderChance, "must be within [0, 1]")
	case c.AttackRange <= 0:
		return errcode.Config("AttackRange", c.AttackRange, "must be positive")
	case c.MaterialiseBudget < 1:
		return errcode.Config("MaterialiseBudget", c.MaterialiseBudget, "must be at least 1")
	case c.TickInterval <= 0:
		return errcode.Config("TickInterval", c.TickInterval, "must be positive")
	}
	if err := c.Economy.validate(); err != nil {
		return err
	}
	return nil
}
