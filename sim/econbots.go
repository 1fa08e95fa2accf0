package sim

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/torus"
)

// What bots do with the reference game's money (BotsConfig.ShopChance and
// TradeChance). A bot sees its own purse only (game.WirePurse), never a
// trade's state, so it reads every outcome from its purse: a purchase is
// its good's count rising; a trade's offer is its side leaving the purse
// (reserved), the commit its partner's side arriving, a cancel its own
// side coming back. The pair's sides are of different kinds so that the
// two outcomes never look alike: the lower index gives coins and gets
// goods (goods rise only by a trade or a purchase, and a trading bot buys
// nothing), the higher gives goods and gets the plan's coins. Loot is
// coins too, so the bot stops attacking before it offers; a kill dealt
// before could still pay out during the trade and be taken for its
// commit, on the goods side, rarely.

const (
	// shopStand is how far from a den's keeper a buying bot stands,
	// well within the game's reach (game.EconomyConfig.ShopReach, 8 m).
	shopStand = 3.0
	// tradeSettle is how long a bot waits, once it sees its partner at
	// the meeting point, before it offers: an offer is refused unless the
	// deciding master's node holds the partner (across a border, as a
	// simulation ghost), which the other node's client seeing it does not
	// prove.
	tradeSettle = 500 * time.Millisecond
	// acceptEvery: a bot whose offer is reserved accepts again this
	// often until the trade commits (an accept before the partner's
	// offer does nothing, and the bot cannot see that offer).
	acceptEvery = 250 * time.Millisecond
	// offerRetry: an offer not reserved this long after it was sent (lost
	// because the deciding node did not see the partner yet) is sent
	// again, at most maxOffers times in all; within the open trade the
	// game ignores a second offer of a side.
	offerRetry = 2 * time.Second
	maxOffers  = 3
	// tradeApproach is how far from its side of a meeting point, in
	// chunk edges, a bot comes from (see trade): past the default
	// handoff margin, one chunk edge.
	tradeApproach = 1.5
	// cancelWait bounds the wait, after a cancel, for the purse to say
	// how the trade ended (a commit can overtake the cancel).
	cancelWait = 5 * time.Second
)

// shop is a shopping trip after a leg: to the nearest keeper in sight, or,
// none in sight and a leg to follow, to the first the next leg comes
// across.
func (b *bot) shop(ctx context.Context, last bool) error {
	var den torus.Pos
	var ok bool
	b.c.Look(func(v *View) { den, ok = b.nearestDen(v) })
	switch {
	case ok:
		return b.buyAt(ctx, den, time.Now().Add(b.cfg.LegTimeout))
	case last:
		b.count(func(s *BotStats) { s.ShopMisses++ })
	default:
		b.shopPending = true
	}
	return nil
}

// nearestDen is where the den nearest to the master stands, of those the
// client sees.
func (b *bot) nearestDen(v *View) (torus.Pos, bool) {
	me, ok := v.Where(b.master)
	if !ok {
		return torus.Pos{}, false
	}
	var best torus.Pos
	bestD, found := math.Inf(1), false
	v.Each(func(e *Entity) {
		if vis := e.Components[game.WireVisual]; len(vis) != 1 || game.Kind(vis[0]) != game.KindDen {
			return
		}
		q, ok := v.Where(e.ID)
		if !ok {
			return
		}
		if d := b.geo.Distance(me, q); d < bestD {
			best, bestD, found = q, d, true
		}
	})
	return best, found
}

// buyAt walks to the keeper of the den at den and buys what the purse
// affords, then waits ShopWait for the purse to show it.
func (b *bot) buyAt(ctx context.Context, den torus.Pos, deadline time.Time) error {
	var me torus.Pos
	b.c.Look(func(v *View) { me, _ = v.Where(b.master) })
	d := b.geo.Delta(den, me)
	off := torus.Pos{X: shopStand}
	if n := math.Hypot(d.X, d.Y); n > 0.1 {
		off = torus.Pos{X: d.X / n * shopStand, Y: d.Y / n * shopStand}
	}
	arrived, _, err := b.travel(ctx, b.geo.Normalise(b.geo.Translate(den, off)), deadline, nil)
	if err != nil {
		return err
	}
	var pu game.Purse
	var known bool
	b.c.Look(func(v *View) { pu, known = v.Purse() })
	good, n, afford := b.pickGood(pu)
	if !arrived || !known || !afford {
		b.count(func(s *BotStats) { s.ShopMisses++ })
		return nil
	}
	want := pu.Goods[good-1] + int64(n)
	m := b.master
	if err := b.input(ctx, func(ctx context.Context) (uint32, error) { return b.c.Buy(ctx, m, good, n) }); err != nil {
		b.count(func(s *BotStats) { s.PurchasesUnseen++ }) // perhaps sent, never seen
		return b.lost(ctx)
	}
	bought, err := b.await(ctx, time.Now().Add(b.cfg.ShopWait), true, func(v *View) bool {
		p, ok := v.Purse()
		return ok && p.Goods[good-1] >= want
	})
	b.count(func(s *BotStats) {
		switch {
		case bought:
			s.Purchases++
		case err != nil: // the play ended or the socket closed first
			s.PurchasesUnseen++
		default:
			s.PurchasesRefused++
		}
	})
	if errors.Is(err, errGone) {
		return b.lost(ctx)
	}
	return err
}

// pickGood draws a good the purse affords at least one of, at random, and
// a count of one to three of it, as many as it affords.
func (b *bot) pickGood(pu game.Purse) (game.Good, int, bool) {
	var can []game.Good
	for _, g := range game.Goods {
		if g.Price() <= pu.Coins {
			can = append(can, g)
		}
	}
	if len(can) == 0 {
		return 0, 0, false
	}
	g := can[b.choices.IntN(len(can))]
	most := int(min(3, pu.Coins/g.Price()))
	return g, 1 + b.choices.IntN(most), true
}

// tradeOffer is this bot's side of the pair's trade, from its purse: the
// plan's coins for the pair's lower index, one or two of the good it
// holds most of for the higher; false if the purse lacks it.
func (b *bot) tradeOffer(pu game.Purse, st BotStep) (game.Offer, bool) {
	if b.index < st.Partner {
		return game.Offer{Coins: st.Coins}, pu.Coins >= st.Coins
	}
	best := -1
	for i, n := range pu.Goods {
		if n > 0 && (best < 0 || n > pu.Goods[best]) {
			best = i
		}
	}
	if best < 0 {
		return game.Offer{}, false
	}
	return game.Offer{Good: game.Goods[best], Count: 1 + b.choices.Int64N(min(2, pu.Goods[best]))}, true
}

// tradeState is what a trading bot's purse says of its trade.
type tradeState uint8

const (
	tradeOpen      tradeState = iota // nothing yet, or the offer reserved
	tradeCommitted                   // the partner's side arrived
	tradeReturned                    // the bot's own side came back
)

// tradeWatch reads a trade's progress from the purse: p0 before the
// offer, give this bot's side, get the coins the goods side gets.
type tradeWatch struct {
	p0       game.Purse
	give     game.Offer
	get      int64
	coinSide bool
	reserved bool // the offer was seen to leave the purse
}

func (w *tradeWatch) observe(p game.Purse) tradeState {
	if w.coinSide {
		for i := range p.Goods {
			if p.Goods[i] > w.p0.Goods[i] {
				return tradeCommitted
			}
		}
		switch {
		case p.Coins <= w.p0.Coins-w.give.Coins:
			w.reserved = true
		case w.reserved && p.Coins >= w.p0.Coins:
			return tradeReturned
		}
		return tradeOpen
	}
	g := w.give.Good - 1
	switch {
	case p.Goods[g] <= w.p0.Goods[g]-w.give.Count:
		w.reserved = true
		if p.Coins >= w.p0.Coins+w.get {
			return tradeCommitted
		}
	case w.reserved && p.Goods[g] >= w.p0.Goods[g]:
		return tradeReturned
	}
	return tradeOpen
}

// trade is a StepTrade: walk to the bot's side of the meeting point, wait
// TradeWait for the partner to stand at its side, offer, accept until the
// purse shows the commit, and past TradeWait cancel.
func (b *bot) trade(ctx context.Context, st BotStep) error {
	skipped := func(s *BotStats) { s.TradeSkips++ }
	timedOut := func(s *BotStats) { s.TradeTimeouts++ }
	cancelled := func(s *BotStats) { s.TradesCancelled++ }
	var pu game.Purse
	var known bool
	b.c.Look(func(v *View) { pu, known = v.Purse() })
	if !known || pu == (game.Purse{}) {
		// Just logged in (a first trade, TradeFirst): the purse comes with
		// the first batches, and the game sends an empty one until the
		// economy has answered its first read (the wire does not say
		// which), so an empty purse is waited on for a while too.
		_, err := b.await(ctx, time.Now().Add(b.cfg.ShopWait), false, func(v *View) bool {
			p, k := v.Purse()
			return k && p != (game.Purse{})
		})
		if err != nil && !errors.Is(err, errGone) {
			return err
		}
		b.c.Look(func(v *View) { pu, known = v.Purse() })
	}
	// A first trade's pair says where it stands before either may skip
	// it, so that a partner never waits for a bot that is not coming.
	to, from, near := st.To, st.PartnerAt, false
	if st.Near {
		to, from, near = b.meetNear(ctx, st)
	}
	mine := b.geo.Normalise(b.geo.Translate(b.cfg.Centre, to))
	theirs := b.geo.Normalise(b.geo.Translate(b.cfg.Centre, from))
	if _, ok := b.tradeOffer(pu, st); !known || !ok {
		b.count(skipped)
		return nil
	}
	// Come to the meeting point from the bot's own side of the line, from
	// farther than the handoff margin (tradeApproach): its own
	// side's node then simulates it, and each node finds the other's
	// trader as a simulation ghost. One that came over the line would
	// stand inside the margin, still simulated by the node it came from,
	// and the node of its side would not find it (docs/decisions.md, the
	// zone's known gaps).
	approach, far := b.approach(mine, theirs)
	// A near meeting has the bot on its own side of the line since it
	// logged in (simulated by that side's node): it walks straight there.
	far = far || near
	deadline := time.Now().Add(b.cfg.LegTimeout)
	arrived, err := true, error(nil)
	if !far {
		arrived, _, err = b.travel(ctx, approach, deadline, nil)
	}
	if err == nil && arrived {
		arrived, _, err = b.travel(ctx, mine, deadline, nil)
	}
	m := b.master
	if err == nil && arrived {
		// The last step: the master stands at its spot, not within the
		// 1.5 m the walk calls arrived.
		arrived, err = b.await(ctx, deadline, true, func(v *View) bool { return stands(v, m) })
	}
	if errors.Is(err, errGone) {
		b.count(timedOut)
		return b.lost(ctx)
	}
	if err != nil {
		return err
	}
	if !arrived {
		b.count(timedOut)
		return nil
	}
	// Stop attacking: no loot during the trade.
	if err := b.input(ctx, func(ctx context.Context) (uint32, error) { return b.c.Stop(ctx, m) }); err != nil {
		b.count(timedOut)
		return b.lost(ctx)
	}
	b.fighting = 0
	var partner uint64
	var partnerAt torus.Pos
	showed, err := b.await(ctx, time.Now().Add(b.cfg.TradeWait), false, func(v *View) bool {
		partner, partnerAt = b.findPartner(v, theirs)
		return partner != 0
	})
	switch {
	case errors.Is(err, errGone):
		b.count(timedOut)
		return b.lost(ctx)
	case err != nil:
		return err
	case !showed:
		b.count(timedOut)
		return nil
	}
	if !pause(ctx, tradeSettle) {
		return ctx.Err()
	}
	b.c.Look(func(v *View) { pu, known = v.Purse() })
	give, ok := b.tradeOffer(pu, st)
	if !known || !ok {
		b.count(skipped)
		return nil
	}
	w := &tradeWatch{p0: pu, give: give, get: st.Coins, coinSide: b.index < st.Partner}
	offer := func(ctx context.Context) (uint32, error) { return b.c.Offer(ctx, m, partner, give) }
	committed := func() error {
		var at torus.Pos
		b.c.Look(func(v *View) {
			at, _ = v.Where(m)
			if q, ok := v.Where(partner); ok {
				partnerAt = q
			}
		})
		b.count(func(s *BotStats) {
			s.TradesCommitted++
			if len(s.TradeLog) < 16 {
				s.TradeLog = append(s.TradeLog, TradeMeeting{Bot: b.index, Partner: st.Partner, At: at, PartnerAt: partnerAt})
			}
		})
		return nil
	}
	var state tradeState
	watch := func(v *View) bool {
		if p, ok := v.Purse(); ok {
			state = w.observe(p)
		}
		return state != tradeOpen
	}
	if err := b.input(ctx, offer); err != nil {
		b.count(cancelled)
		return b.lost(ctx)
	}
	offers, offered := 1, time.Now()
	deadline = time.Now().Add(b.cfg.TradeWait)
	for time.Now().Before(deadline) {
		next := time.Now().Add(acceptEvery)
		if deadline.Before(next) {
			next = deadline
		}
		done, err := b.await(ctx, next, false, watch)
		switch {
		case errors.Is(err, errGone): // the game cancels a logged-out player's trades
			b.count(cancelled)
			return b.lost(ctx)
		case err != nil:
			return err
		case done && state == tradeCommitted:
			return committed()
		case done: // the game cancelled: the partner left, or an offer was refused
			b.count(cancelled)
			return nil
		}
		switch {
		case w.reserved:
			err = b.input(ctx, func(ctx context.Context) (uint32, error) { return b.c.Accept(ctx, m, partner) })
		case time.Since(offered) >= offerRetry && offers < maxOffers:
			err = b.input(ctx, offer)
			offers, offered = offers+1, time.Now()
		}
		if err != nil {
			b.count(cancelled)
			return b.lost(ctx)
		}
	}
	if err := b.input(ctx, func(ctx context.Context) (uint32, error) { return b.c.CancelTrade(ctx, m, partner) }); err != nil {
		b.count(cancelled)
		return b.lost(ctx)
	}
	// A commit can overtake the cancel: the purse says which came first.
	_, err = b.await(ctx, time.Now().Add(min(cancelWait, b.cfg.TradeWait)), false, watch)
	switch {
	case errors.Is(err, errGone):
		b.count(cancelled)
		return b.lost(ctx)
	case err != nil:
		return err
	case state == tradeCommitted:
		return committed()
	}
	b.count(cancelled)
	return nil
}

// approach is where a bot comes to its spot mine from, its partner's
// being theirs: the point tradeApproach chunk edges out on its own side
// of the line between them, level with where the master stands; far says
// the master stands that far out already, and walks straight to its spot.
func (b *bot) approach(mine, theirs torus.Pos) (torus.Pos, bool) {
	var me torus.Pos
	b.c.Look(func(v *View) { me, _ = v.Where(b.master) })
	d := b.geo.Delta(theirs, mine)
	n := math.Hypot(d.X, d.Y)
	if n == 0 {
		return mine, true
	}
	u := torus.Pos{X: d.X / n, Y: d.Y / n} // across the line, towards mine's side
	mid := b.geo.Translate(theirs, torus.Pos{X: d.X / 2, Y: d.Y / 2})
	rel := b.geo.Delta(mid, me)
	out := tradeApproach * float64(b.geo.ChunkEdge())
	across := rel.X*u.X + rel.Y*u.Y
	if across >= out {
		return mine, true
	}
	level := torus.Pos{X: rel.X + (out-across)*u.X, Y: rel.Y + (out-across)*u.Y}
	return b.geo.Normalise(b.geo.Translate(mid, level)), false
}

// findPartner returns the player master other than the bot's own that
// the client sees standing still at at (within 1 m): its partner, come to
// the meeting point, and not a player walking past.
func (b *bot) findPartner(v *View, at torus.Pos) (uint64, torus.Pos) {
	var id uint64
	var where torus.Pos
	v.Each(func(e *Entity) {
		if id != 0 || e.ID == b.master {
			return
		}
		if vis := e.Components[game.WireVisual]; len(vis) != 1 || game.Kind(vis[0]) != game.KindPlayer {
			return
		}
		if q, ok := v.Where(e.ID); ok && b.geo.Within(q, at, 1) && stands(v, e.ID) {
			id, where = e.ID, q
		}
	})
	return id, where
}

// stands reports whether the client sees id standing: its Path inactive.
func stands(v *View, id uint64) bool {
	e, ok := v.Entity(id)
	if !ok {
		return false
	}
	p, err := game.DecodePath(e.Components[game.WirePath])
	return err == nil && !p.Active
}

// pairMeet is where the two bots of a pair stood when their first trade
// began (BotStep.Near): each sets its own side once, the other reads it.
type pairMeet struct {
	at   [2]torus.Pos
	ok   [2]bool // the bot knew where it stood
	done [2]chan struct{}
}

func newPairMeet() *pairMeet {
	return &pairMeet{done: [2]chan struct{}{make(chan struct{}), make(chan struct{})}}
}

// meetNear tells the partner where the bot stands (an offset from
// Centre), waits for it to say the same (TradeWait at most), and returns
// the near meeting (nearMeeting): the bot's spot, its partner's, and true;
// or, when either did not know where it stood, st's own spots and false.
func (b *bot) meetNear(ctx context.Context, st BotStep) (torus.Pos, torus.Pos, bool) {
	var at torus.Pos
	var known bool
	b.c.Look(func(v *View) { at, known = v.Where(b.master) })
	me, them := b.index&1, (b.index&1)^1
	m := b.meet
	select {
	case <-m.done[me]: // said already: a trade begun again after a reconnect
		return st.To, st.PartnerAt, false
	default:
	}
	m.at[me], m.ok[me] = b.geo.Delta(b.cfg.Centre, at), known
	close(m.done[me])
	t := time.NewTimer(b.cfg.TradeWait)
	defer t.Stop()
	select {
	case <-m.done[them]:
	case <-t.C:
		return st.To, st.PartnerAt, false
	case <-ctx.Done():
		return st.To, st.PartnerAt, false
	}
	if !known || !m.ok[them] {
		return st.To, st.PartnerAt, false
	}
	even, odd := m.at[0], m.at[1]
	evenSpot, oddSpot := nearMeeting(st, b.index&1 == 1, even, odd, tradeApproach*float64(b.geo.ChunkEdge()))
	if me == 1 {
		return oddSpot, evenSpot, true
	}
	return evenSpot, oddSpot, true
}

// nearMeeting is where a pair whose bots stand at even and odd (offsets
// from Centre) meets: on a line through Centre that runs between them,
// each on its own side (the line st planned if it runs between them, else
// the other one), at the middle of their positions along the line but at
// least minAlong from the other line (on the side st planned when they
// are centred on it); or, on one side of both lines, side by side at the
// middle of their positions. odd says whether st is the odd bot's (its
// To is the odd bot's spot). Both bots compute it from the same
// positions, so they agree.
func nearMeeting(st BotStep, odd bool, evenAt, oddAt torus.Pos, minAlong float64) (evenSpot, oddSpot torus.Pos) {
	evenPlan, oddPlan := st.To, st.PartnerAt
	if odd {
		evenPlan, oddPlan = oddPlan, evenPlan
	}
	// across picks the coordinate across a line: Y for y = Centre.Y
	// (the planned spots differ in Y), X for x = Centre.X.
	type line struct{ acrossY bool }
	planned := line{acrossY: evenPlan.X == oddPlan.X}
	for _, l := range []line{planned, {acrossY: !planned.acrossY}} {
		split := func(p torus.Pos) (across, along float64) {
			if l.acrossY {
				return p.Y, p.X
			}
			return p.X, p.Y
		}
		ea, eal := split(evenAt)
		oa, oal := split(oddAt)
		if ea == 0 || oa == 0 || (ea > 0) == (oa > 0) {
			continue // on one side: one of them would have to cross
		}
		along := (eal + oal) / 2
		if math.Abs(along) < minAlong {
			_, planAlong := split(evenPlan)
			if along == 0 && l == planned {
				along = planAlong
			}
			along = math.Copysign(minAlong, along)
		}
		spot := func(across float64) torus.Pos {
			a := math.Copysign(tradeGap, across)
			if l.acrossY {
				return torus.Pos{X: along, Y: a}
			}
			return torus.Pos{X: a, Y: along}
		}
		return spot(ea), spot(oa)
	}
	// On one side of both lines (a party starts together): side by side
	// at the middle of their positions, each on the side of the planned
	// line it was to stand on. Neither crosses a line between the nodes
	// it stood on since login (a quadrant is one node's), so the node
	// that simulates one finds the other.
	mid := torus.Pos{X: (evenAt.X + oddAt.X) / 2, Y: (evenAt.Y + oddAt.Y) / 2}
	beside := func(plan torus.Pos) torus.Pos {
		if planned.acrossY {
			return torus.Pos{X: mid.X, Y: mid.Y + math.Copysign(tradeGap, plan.Y)}
		}
		return torus.Pos{X: mid.X + math.Copysign(tradeGap, plan.X), Y: mid.Y}
	}
	return beside(evenPlan), beside(oddPlan)
}
