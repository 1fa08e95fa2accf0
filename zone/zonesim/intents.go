package zonesim

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/zone"
)

// intentKind is the kind of the harness's numbered intents.
const intentKind = 1

// intentLog numbers the intents the harness sends (Config.Intents) and
// records where each was applied: every intent must be applied exactly
// once, wherever its target went meanwhile.
type intentLog struct {
	rng     *rand.Rand
	sent    int64
	applied map[int64][]string
	appTick map[int64]uint64 // the tick it was (last) applied
	tick    uint64           // the tick being run
	target  map[int64]ecs.ID
	at      map[int64]uint64 // the tick it was sent
	from    map[int64]string // the node it was sent on
	// quiet and lossAt: an intent sent within quiet ticks before a lease
	// is lost (at lossAt) may be in the lost node's hands, queued or on
	// its way through it, and is lost with it.
	quiet, lossAt uint64
}

func newIntentLog(seed uint64) *intentLog {
	return &intentLog{rng: rand.New(rand.NewPCG(seed, 0x696e74656e7473)), applied: make(map[int64][]string),
		appTick: make(map[int64]uint64), target: make(map[int64]ecs.ID), at: make(map[int64]uint64),
		from: make(map[int64]string)}
}

// hook makes runtime r, named name, record the intents it applies.
func (l *intentLog) hook(name string, r *zone.Runtime) {
	r.OnIntent(func(_ *ecs.World, in zone.Intent) {
		if in.Kind == intentKind {
			l.applied[in.Amount] = append(l.applied[in.Amount], name)
			l.appTick[in.Amount] = l.tick
		}
	})
}

// send sends n intents, each to a random wanderer from a random live
// node that indexes it (simulates it, or holds its ghost), as a module
// system or a client's input would.
func (l *intentLog) send(t uint64, n int, rts []*zone.Runtime, names []string, leases *Leases, ids []ecs.ID, dead func(int) bool) {
	for range n {
		id := ids[l.rng.IntN(len(ids))]
		for _, i := range l.rng.Perm(len(rts)) {
			r := rts[i]
			if leases.Lost(names[i]) || dead(i) {
				continue
			}
			if _, ok := r.ChunkOf(id); ok {
				l.sent++
				l.target[l.sent], l.at[l.sent], l.from[l.sent] = id, t, names[i]
				r.Send(zone.Intent{Kind: intentKind, Target: id, Amount: l.sent})
				break
			}
		}
	}
}

// check is the property at the end of a run: every intent sent applied
// exactly once, but those whose target a lost lease took.
func (l *intentLog) check(lost map[ecs.ID]bool) (missing, twice []string) {
	for k := int64(1); k <= l.sent; k++ {
		switch nodes := l.applied[k]; {
		case len(nodes) > 1:
			twice = append(twice, fmt.Sprintf("intent %d (to entity %d, sent at tick %d) applied on %v", k, l.target[k], l.at[k], nodes))
		case len(nodes) == 0 && !lost[l.target[k]] && !l.lostWith(k):
			missing = append(missing, fmt.Sprintf("intent %d (to entity %d, sent at tick %d)", k, l.target[k], l.at[k]))
		}
	}
	slices.Sort(missing)
	return missing, twice
}

// lostWith reports whether intent k may have been lost with a lease.
func (l *intentLog) lostWith(k int64) bool {
	return l.lossAt != 0 && l.at[k] <= l.lossAt && l.at[k]+l.quiet >= l.lossAt
}

// checkKill is the property with Config.Kill, where the harness excuses
// nothing: every intent sent is applied at most once, and every one never
// applied is counted by a node (dropped, held for a fenced node's entity
// or a frozen one, or, on the dead node, sent and never confirmed: in
// flight when it died). The count is exact but for the one class no node
// can tell apart, an intent on its way through the dead node around the
// kill whose confirmation died with it: its sender counts it lost though
// the dead node applied it, or held it (and counts it too). overlap is
// how many intents fall in that class's window, from since (a few ticks
// before the kill, or before a cut of the dead node from a peer that
// lasted to the kill: its confirmations waited for a heal that never
// came) to the kill: applied on the dead node, or sent on it, or never
// applied and sent then.
func (l *intentLog) checkKill(rts []*zone.Runtime, dead string, since, killAt uint64) (missing, twice []string, counted, overlap int) {
	for _, r := range rts {
		s := r.ClusterStats()
		counted += s.IntentsDropped + s.IntentsAwaiting + s.IntentsHeld + s.IntentsInFlight
	}
	for k := int64(1); k <= l.sent; k++ {
		switch nodes := l.applied[k]; {
		case len(nodes) > 1:
			twice = append(twice, fmt.Sprintf("intent %d (to entity %d, sent on %s at tick %d) applied on %v", k, l.target[k], l.from[k], l.at[k], nodes))
		case len(nodes) == 0:
			missing = append(missing, fmt.Sprintf("intent %d (to entity %d, sent on %s at tick %d)", k, l.target[k], l.from[k], l.at[k]))
			if l.at[k] < killAt && l.at[k] >= since {
				overlap++
			}
		case (nodes[0] == dead || l.from[k] == dead) && l.appTick[k] >= since:
			overlap++
		}
	}
	slices.Sort(missing)
	return missing, twice, counted, overlap
}
