package wander

import (
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"math"
)

// Config configures the module. Zero fields take the defaults documented
// on them, filled by WithDefaults and nowhere else. The checks that need
// the runtime's grid (Margin against the region edge, Area against the
// torus) run in Setup.
type Config struct {
	// Seed makes the run reproducible: same seed, same wanderers, same
	// bytes.
	Seed uint64
	// Entities is how many wanderers the world holds (over all nodes).
	// Default 64.
	Entities int
	// Accounts is how many accounts own them, round robin; at most
	// Entities, so that every account has a wanderer to view from.
	// Default 4, or Entities if that is fewer.
	Accounts int
	// Area is the side, in metres, of the square centred on Centre where
	// wanderers spawn; it may lie across the seam. 0 means the whole
	// torus. It must fit the torus.
	Area float64
	// Centre is the centre of the spawn square; ignored when Area is 0.
	Centre torus.Pos
	// Margin is how close, in metres, a wanderer ever comes to a border of
	// its region. Default 64: cells' default handoff margin (32 m) plus a
	// 32 m chunk. It must be less than half the region edge.
	Margin float64
	// Speed is how fast a wanderer walks, in metres per second. Default 4.
	Speed float64
	// MoodEvery is how many of its steps a wanderer keeps a mood. Default
	// 40 (2 s at 20 Hz).
	MoodEvery int
	// SecretEvery is how many of its steps a wanderer keeps a secret.
	// Default 100 (5 s at 20 Hz).
	SecretEvery int
	// Roam, when positive, lets wanderers cross borders: each waypoint is
	// drawn in the square of side Roam metres centred on the wanderer's
	// spawn point, on the torus, whatever region it falls in (and Margin
	// only keeps spawn points off the borders). 0, the default, keeps
	// every wanderer inside its spawn region.
	Roam float64
}

// WithDefaults returns c with zero fields filled in.
func (c Config) WithDefaults() Config {
	if c.Entities == 0 {
		c.Entities = 64
	}
	if c.Accounts == 0 {
		c.Accounts = min(4, max(c.Entities, 1))
	}
	if c.Margin == 0 {
		c.Margin = 64
	}
	if c.Speed == 0 {
		c.Speed = 4
	}
	if c.MoodEvery == 0 {
		c.MoodEvery = 40
	}
	if c.SecretEvery == 0 {
		c.SecretEvery = 100
	}
	return c
}

// Validate checks c after defaults. Every error is an errcode.Config
// naming the field and its value.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Entities < 0 || uint64(c.Entities-1) > zone.MaxDerivedKey:
		return errcode.Config("Entities", c.Entities, "must be positive and within the derived ids")
	case c.Accounts < 0 || c.Accounts > c.Entities:
		return errcode.Config("Accounts", c.Accounts, "must be positive and at most Entities")
	case !(c.Area >= 0): // NaN too
		return errcode.Config("Area", c.Area, "must not be negative")
	case !c.Centre.Finite():
		return errcode.Config("Centre", c.Centre, "must be finite")
	case !(c.Margin > 0):
		return errcode.Config("Margin", c.Margin, "must be positive")
	case !(c.Speed > 0) || c.Speed > 1e6:
		return errcode.Config("Speed", c.Speed, "must be positive and finite")
	case c.MoodEvery < 1:
		return errcode.Config("MoodEvery", c.MoodEvery, "must be at least 1")
	case c.SecretEvery < 1:
		return errcode.Config("SecretEvery", c.SecretEvery, "must be at least 1")
	case !(c.Roam >= 0) || math.IsInf(c.Roam, 0):
		return errcode.Config("Roam", c.Roam, "must be finite and not negative")
	}
	return nil
}
