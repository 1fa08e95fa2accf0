package outbox

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/interest"
)

// compKey names one component of one entity, as the test marked it dirty.
type compKey[E interest.Entity] struct {
	e E
	t ComponentType
}

// indexedGame is the test world with the IndexedWorld fast path, so that
// both ways of resolving observers are held to the same naive build.
type indexedGame struct{ *game }

func (g indexedGame) AppendObserverIndices(dst []int32, e ent) []int32 {
	return g.vis.AppendObserverIndices(dst, e)
}
func (g indexedGame) SubscriberAt(i int32) acct { return g.vis.SubscriberAt(i) }
func (g indexedGame) SubscriberEpoch() uint64   { return g.vis.SubscriberEpoch() }

// naiveBatch builds what subscriber s must receive this tick the slow,
// obvious way: every rule re-derived from the game's declarations and
// every message encoded afresh for this one recipient.
func naiveBatch(g *game, s acct, vanished []interest.Vanished[ent], appeared []ent, dirty []compKey[ent]) []byte {
	has := func(e ent, t ComponentType) bool { _, ok := g.comps[e][t]; return ok }
	may := func(e ent, t ComponentType, inBurst bool) bool {
		aud := g.audienceOf(e, t)
		owner, owned := g.owner[e]
		switch aud.Kind {
		case PublicInRange:
			if inBurst {
				return true
			}
			c, ok := g.vis.ChunkOf(e)
			return ok && g.subs.IsSent(s, c)
		case OwnerOnly:
			return owned && owner == s
		case Accounts:
			return slices.Contains(aud.Members, s)
		case OwnerAndParty:
			return owned && (owner == s || slices.Contains(g.party[owner], s))
		}
		return false
	}
	var b []byte
	for _, v := range vanished {
		b = AppendVanishFrame(b, v.Entity, v.Reason)
	}
	for _, e := range appeared {
		var burst []ComponentType
		for _, t := range allTypes {
			if has(e, t) && may(e, t, true) {
				burst = append(burst, t)
			}
		}
		b = AppendAppearFrame(b, e, len(burst))
		for _, t := range burst {
			b = AppendComponentFrame(b, e, t, g.payload(nil, e, t))
		}
	}
	for _, k := range dirty {
		if has(k.e, k.t) && may(k.e, k.t, false) && !slices.Contains(appeared, k.e) {
			b = AppendComponentFrame(b, k.e, k.t, g.payload(nil, k.e, k.t))
		}
	}
	return b
}

// TestOwnerOnlyNeverLeaksAndMatchesNaive plays random scenes — owners
// changing, parties reshuffling, entities walking, dying, being tamed — and
// checks after every flush that (1) no subscriber received an owner-only
// component of an entity it does not own, nor a party component outside
// the party, and (2) every batch equals the naive per-recipient build.
func TestOwnerOnlyNeverLeaksAndMatchesNaive(t *testing.T) {
	ownerOnlyFrames := 0 // the property is vacuous unless some are delivered
	for seed := range uint64(80) {
		rng := rand.New(rand.NewPCG(seed, 7))
		g := newGame()
		// Two outboxes see the same calls: one resolves observers by key,
		// the other through the World's dense indices (IndexedWorld).
		outs := []*Outbox[acct, ent]{New[acct, ent](g), New[acct, ent](indexedGame{g})}
		if outs[0].indexed != nil || outs[1].indexed == nil {
			t.Fatal("the two outboxes do not take the two observer paths")
		}
		sinks := make([]map[acct]*recorder, len(outs))
		for k, o := range outs {
			g.register(t, o)
			sinks[k] = map[acct]*recorder{}
			for a := acct(1); a <= 8; a++ { // 9 and 10 own things but have no sink
				sinks[k][a] = &recorder{}
				o.Attach(a, sinks[k][a])
			}
		}
		attached := map[acct]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true}
		chunk := func() interest.ChunkPos {
			return interest.ChunkPos{X: int32(rng.IntN(4)) - 2, Y: int32(rng.IntN(4)) - 2}
		}
		var dirty []compKey[ent]
		mark := func(e ent, ty ComponentType) {
			for _, o := range outs {
				o.MarkDirty(e, ty)
			}
			if !slices.Contains(dirty, compKey[ent]{e: e, t: ty}) {
				dirty = append(dirty, compKey[ent]{e: e, t: ty})
			}
		}
		for tick := uint64(1); tick <= 30; tick++ {
			dirty = dirty[:0]
			// Reshuffle parties now and then.
			if rng.IntN(5) == 0 {
				clear(g.party)
				for a := acct(1); a <= 10; a += 2 {
					if rng.IntN(2) == 0 {
						p := []acct{a, a + 1}
						g.party[a], g.party[a+1] = p, p
					}
				}
			}
			// Subscribers take and drop chunks; 11 and 12 have no sink
			// and come and go, so dense indices get reused by other keys.
			// Subscribers with a sink are forgotten now and then too
			// while their sink stays attached: the index they leave is
			// taken by another key, and the outbox must notice (the
			// world's SubscriberEpoch) without any Attach or Detach.
			for a := acct(1); a <= 12; a++ {
				c := chunk()
				switch {
				case a <= 8 && rng.IntN(12) == 0:
					g.subs.Forget(a)
				case a > 10 && rng.IntN(4) == 0:
					g.subs.Forget(a)
				case a > 10 && rng.IntN(2) == 0:
				case rng.IntN(2) == 0:
					g.hold(a, c)
				default:
					g.subs.Withdraw(a, c)
				}
			}
			// Sinks are detached and attached again now and then.
			for a := acct(1); a <= 8; a++ {
				if rng.IntN(10) != 0 {
					continue
				}
				attached[a] = !attached[a]
				for k, o := range outs {
					if attached[a] {
						o.Attach(a, sinks[k][a])
					} else {
						o.Detach(a)
					}
				}
			}
			// Entities spawn, walk, change owner, change values, die.
			for e := ent(1); e <= 40; e++ {
				_, alive := g.comps[e]
				switch r := rng.IntN(12); {
				case !alive && r < 3:
					if rng.IntN(2) == 0 {
						g.owner[e] = acct(rng.IntN(10) + 1)
					}
					g.set(e, tPosition, uint64(rng.IntN(1000)))
					for _, ty := range []ComponentType{tInventory, tHealth, tStatus, tQuest} {
						if rng.IntN(3) > 0 {
							g.set(e, ty, uint64(rng.IntN(1000)))
						}
					}
					if rng.IntN(2) == 0 {
						g.quest[e] = []acct{acct(rng.IntN(10) + 1), acct(rng.IntN(10) + 1)}
					}
					g.vis.Reindex(e, chunk())
				case !alive:
				case r == 0:
					delete(g.comps, e)
					delete(g.owner, e)
					g.vis.Remove(e, interest.Death)
				case r == 1:
					if _, owned := g.owner[e]; owned {
						delete(g.owner, e)
					} else {
						g.owner[e] = acct(rng.IntN(10) + 1)
					}
				case r < 6:
					g.vis.Reindex(e, chunk())
					mark(e, tPosition)
					if rng.IntN(2) == 0 { // a second change of the same entity
						ty := allTypes[rng.IntN(len(allTypes))]
						g.set(e, ty, uint64(rng.IntN(1000)))
						mark(e, ty)
					}
				default:
					// One to three changes, repeats included: an entity
					// with several dirty components (and marks twice).
					for range 1 + rng.IntN(3) {
						ty := allTypes[rng.IntN(len(allTypes))]
						g.set(e, ty, uint64(rng.IntN(1000)))
						mark(e, ty)
					}
				}
			}
			ds := g.vis.Drain()
			before := make([]map[acct]int, len(outs))
			var stats []Stats
			for k, o := range outs {
				o.AddDeliveries(ds)
				before[k] = map[acct]int{}
				for a, r := range sinks[k] {
					before[k][a] = len(r.batches)
				}
				stats = append(stats, o.Flush(tick))
			}
			if stats[0] != stats[1] {
				t.Fatalf("seed %d tick %d: by key %+v, by index %+v", seed, tick, stats[0], stats[1])
			}

			for k := range outs {
				for a, r := range sinks[k] {
					var vanished []interest.Vanished[ent]
					var appeared []ent
					for _, d := range ds {
						if d.Subscriber == a {
							vanished, appeared = d.Vanished, d.Appeared
						}
					}
					var want []byte
					if attached[a] {
						want = naiveBatch(g, a, vanished, appeared, dirty)
					}
					var got []byte
					switch len(r.batches) - before[k][a] {
					case 0:
					case 1:
						got = r.last(t).bytes
					default:
						t.Fatalf("seed %d tick %d: account %d got %d batches", seed, tick, a, len(r.batches)-before[k][a])
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("seed %d tick %d outbox %d: account %d\n got %q\nwant %q", seed, tick, k, a, decoded(t, got), decoded(t, want))
					}
					err := DecodeBatch(got, func(m Message) error {
						if m.Kind != KindComponent {
							return nil
						}
						owner, owned := g.owner[ent(m.Entity)]
						switch aud := g.audienceOf(ent(m.Entity), m.Component); aud.Kind {
						case OwnerOnly:
							ownerOnlyFrames++
							if !owned || owner != a {
								t.Fatalf("seed %d tick %d: LEAK: account %d got owner-only type %d of entity %d (owner %d, owned %v)",
									seed, tick, a, m.Component, m.Entity, owner, owned)
							}
						case OwnerAndParty:
							if !owned || (owner != a && !slices.Contains(g.party[owner], a)) {
								t.Fatalf("seed %d tick %d: LEAK: account %d got party type %d of entity %d", seed, tick, a, m.Component, m.Entity)
							}
						}
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	if ownerOnlyFrames < 100 {
		t.Fatalf("only %d owner-only frames delivered: the scenes do not exercise the rule", ownerOnlyFrames)
	}
	t.Logf("%d owner-only frames checked", ownerOnlyFrames)
}

// The property must be able to fail: an encoder that lies about its
// audience (inventory declared public) is caught.
func TestLeakCheckCatchesAWrongAudience(t *testing.T) {
	g, _, sinks := setup(t)
	lying := New[acct, ent](g)
	for _, ty := range allTypes {
		aud := func(e ent) Audience[acct] { return g.audienceOf(e, ty) }
		if ty == tInventory {
			aud = func(ent) Audience[acct] { return Public[acct]() }
		}
		if err := lying.Register(EncoderFuncs[acct, ent]{
			WireType: ty, AudienceFunc: aud,
			HasFunc:     func(e ent) bool { _, ok := g.comps[e][ty]; return ok },
			PayloadFunc: func(dst []byte, e ent) []byte { return binary.AppendUvarint(dst, g.comps[e][ty]) },
		}); err != nil {
			t.Fatal(err)
		}
	}
	lying.Attach(3, sinks[3])
	lying.MarkDirty(100, tInventory)
	lying.Flush(2)
	want := naiveBatch(g, 3, nil, nil, []compKey[ent]{{e: 100, t: tInventory}})
	if bytes.Equal(sinks[3].last(t).bytes, want) {
		t.Fatal("a public inventory went unnoticed by the naive comparison")
	}
}
