package zone

import (
	"fmt"

	"github.com/shardwise/shardwise/errcode"
)

// Timers are the cluster protocol's waits, each a number of ticks (so a
// node's protocol reads no wall clock). Zero fields take the defaults
// documented on them; Validate checks each and the relations between
// them, naming the field as Config.Timers.<Field>.
//
// The relations (checked at New):
//
//	HandoffTimeout < TableGrace   a region move's handoffs end (acked or aborted) within the grace
//	Hold < TableGrace             a vanish held after a table change settles within the grace
//	Resend <= Hold                a refused subscription is asked again before its held vanish gives up
//	TableGrace <= Went            intents routed by the old owners' ghosts (the grace) still find the entity
//	CheckpointEvery <= HandoffRetry   an entity's epoch rises by at most 3 on its node between two checkpoints (the adoption's margin, checkpoint.go)
//	FullRoutes <= Unclaimed       a live session's route, missed as a delta, is learned again before its adopted master is taken for unclaimed
//	Hold <= FenceHold             a vanish held from a peer when its lease ends keeps at least the wait it had
type Timers struct {
	// Park is how long the ghosts of a chunk this node stops holding are
	// kept, unseen, rather than dropped: a few round trips, for the
	// source to take in the unsubscribe. Default 8.
	Park int
	// Hold bounds how long a vanish into a chunk this node holds but
	// does not yet receive from the sender waits for that chunk's
	// snapshot (a subscription's round trip is a few ticks), and how
	// long a ghost its sender's snapshot left out waits for the sender's
	// snapshot of a neighbouring chunk. Default 20.
	Hold int
	// Resync bounds how often one chunk is resynced (a snapshot asked
	// for after a gap) from one peer. Default 10.
	Resync int
	// Resend bounds how often a peer's wants are resent after the link
	// refused a subscription message. Default 20.
	Resend int
	// HandoffTimeout is how long a source waits for a handoff's answer
	// before it asks to abort. Default 40.
	HandoffTimeout int
	// HandoffRetry is how long an entity refused by its target waits
	// before it is tried again. Default 40.
	HandoffRetry int
	// TableGrace is how long after a table change an observer stays
	// subscribed to a chunk's old simulators besides its new ones.
	// Default 100.
	TableGrace int
	// Went is how long a node remembers where an entity went (handed
	// over, or its ghost out of sight), to forward the intents that still
	// come for it. Default 200.
	Went int
	// FullRoutes is how often a node resends its whole route set (a peer
	// that restarted, or missed a delta, learns it again); at least 2.
	// Default 100.
	FullRoutes int
	// CheckpointEvery is how often a node streams the state of the
	// entities it simulates to each region's standby (checkpoint.go): the
	// most simulation a failover loses. Default 20 (1 s at 20 Hz).
	CheckpointEvery int
	// Unclaimed is how long a client player's master this node adopted
	// on failover waits for a session to claim it (lostplayers.go)
	// before it is saved and taken out of the world, as a logout does:
	// the leave of a session that ended while its node was dead went
	// nowhere. A live session's gateway routing the account starts the
	// wait again. Default 200 (10 s at 20 Hz).
	Unclaimed int
	// FenceHold bounds how long the ghosts of a peer whose lease ended
	// are held where they stood (fencehold.go) for a failover's standby
	// to adopt them: what no live node sends at a higher epoch by then
	// vanishes (the dead node took it after its last checkpoint, or there
	// was no failover). It counts from this node's fence of the peer,
	// which is at or after the lease's end, and must cover the rest of
	// the failover: the controller's write and the table's watch (tens
	// of milliseconds; if the controller died too, its election ended
	// with the same lease TTL), the adoption's query round and a
	// replication round trip. So it does not grow with the lease TTL.
	// Default 100 (5 s at 20 Hz).
	FenceHold int
}

// defaultHandoffTimeout is Timers.HandoffTimeout's default, which also
// sizes HandoffStats.AckTicks (a longer timeout lands in the last bucket).
const defaultHandoffTimeout = 40

// defaultCheckpointEvery is Timers.CheckpointEvery's default: one second
// at the default 20 Hz.
const defaultCheckpointEvery = 20

// DefaultTimers returns the timers' defaults.
func DefaultTimers() Timers {
	return Timers{
		Park: 8, Hold: 20, Resync: 10, Resend: 20,
		HandoffTimeout: defaultHandoffTimeout, HandoffRetry: 40,
		TableGrace: 100, Went: 200, FullRoutes: 100,
		CheckpointEvery: defaultCheckpointEvery, FenceHold: 100,
		Unclaimed: 200,
	}
}

// WithDefaults returns t with its zero fields set to their defaults.
func (t Timers) WithDefaults() Timers {
	d := DefaultTimers()
	for _, f := range t.fields() {
		if *f.v == 0 {
			*f.v = *d.field(f.name)
		}
	}
	return t
}

// Validate checks t after defaults: every timer at least one tick, and
// the relations in Timers' doc. Errors are errcode.Config naming the field
// as Config.Timers.<Field>.
func (t Timers) Validate() error {
	t = t.WithDefaults()
	for _, f := range t.fields() {
		if *f.v < 1 {
			return errcode.Config("Config.Timers."+f.name, *f.v, "must be at least 1 tick")
		}
	}
	if t.FullRoutes < 2 {
		// The whole set goes at ticks 1, 1+FullRoutes, …: every tick is
		// not a period of it (send deltas instead; they are sent anyway).
		return errcode.Config("Config.Timers.FullRoutes", t.FullRoutes, "must be at least 2 ticks")
	}
	for _, r := range []struct {
		a, b   string
		strict bool
		why    string
	}{
		{"HandoffTimeout", "TableGrace", true, "a region move's handoffs must end within the grace"},
		{"Hold", "TableGrace", true, "a vanish held after a table change must settle within the grace"},
		{"Resend", "Hold", false, "a refused subscription must be asked again before its held vanish gives up"},
		{"TableGrace", "Went", false, "intents routed through the old owners during the grace must still find the entity"},
		{"CheckpointEvery", "HandoffRetry", false, "an entity's epoch may rise by at most 3 between two checkpoints (the adoption's epoch margin)"},
		{"FullRoutes", "Unclaimed", false, "a live session's route must be learned again before its adopted master is taken for unclaimed"},
		{"Hold", "FenceHold", false, "a vanish held from a peer whose lease ends must keep at least the wait it had"},
	} {
		a, b := *t.field(r.a), *t.field(r.b)
		if a < b || !r.strict && a == b {
			continue
		}
		op := "less than"
		if !r.strict {
			op = "at most"
		}
		return errcode.Config("Config.Timers."+r.a, a, fmt.Sprintf("must be %s Config.Timers.%s (%d): %s", op, r.b, b, r.why))
	}
	return nil
}

type timerField struct {
	name string
	v    *int
}

func (t *Timers) fields() []timerField {
	return []timerField{
		{"Park", &t.Park}, {"Hold", &t.Hold}, {"Resync", &t.Resync}, {"Resend", &t.Resend},
		{"HandoffTimeout", &t.HandoffTimeout}, {"HandoffRetry", &t.HandoffRetry},
		{"TableGrace", &t.TableGrace}, {"Went", &t.Went}, {"FullRoutes", &t.FullRoutes},
		{"CheckpointEvery", &t.CheckpointEvery}, {"FenceHold", &t.FenceHold},
		{"Unclaimed", &t.Unclaimed},
	}
}

func (t *Timers) field(name string) *int {
	for _, f := range t.fields() {
		if f.name == name {
			return f.v
		}
	}
	panic("zone: no timer " + name)
}

// ticks returns n (a validated timer) as a tick count.
func ticks(n int) uint64 { return uint64(n) }
