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
	target  map[int64]ecs.ID
	at      map[int64]uint64 // the tick it was sent
	// quiet and lossAt: an intent sent within quiet ticks before a lease
	// is lost (at lossAt) may be in the lost node's hands, queued or on
	// its way through it, and is lost with it.
	quiet, lossAt uint64
}

func newIntentLog(seed uint64) *intentLog {
	return &intentLog{rng: rand.New(rand.NewPCG(seed, 0x696e74656e7473)), applied: make(map[int64][]string),
		target: make(map[int64]ecs.ID), at: make(map[int64]uint64)}
}

// hook makes runtime r, named name, record the intents it applies.
func (l *intentLog) hook(name string, r *zone.Runtime) {
	r.OnIntent(func(_ *ecs.World, in zone.Intent) {
		if in.Kind == intentKind {
			l.applied[in.Amount] = append(l.applied[in.Amount], name)
		}
	})
}

// send sends n intents, each to a random wanderer from a random live
// node that indexes it (simulates it, or holds its ghost), as a module
// system or a client's input would.
func (l *intentLog) send(t uint64, n int, rts []*zone.Runtime, names []string, leases *Leases, ids []ecs.ID) {
	for range n {
		id := ids[l.rng.IntN(len(ids))]
		for _, i := range l.rng.Perm(len(rts)) {
			r := rts[i]
			if leases.Lost(names[i]) {
				continue
			}
			if _, ok := r.ChunkOf(id); ok {
				l.sent++
				l.target[l.sent], l.at[l.sent] = id, t
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
