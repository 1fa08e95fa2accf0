package game

// Trades (seed 002's first open problem: trade across a border).
//
// Two players trade goods for coins, each on whatever node simulates its
// master. Who decides is fixed by the masters' ids: the lower id decides
// (side a), its partner asks (side b). The deciding master's node runs
// the trade, as an entry of the master's Trades component, handed over
// with it; the partner's node only sends its player's requests (offer,
// accept, cancel) as intents to the deciding master and keeps a copy of
// the trade from the notices the decider sends back.
//
// On the economy cluster a trade is at most five movements, each with a
// key of its own, sent by the deciding node alone:
//
//  1. offer a and offer b, each in its player's scope: the side's coins
//     and goods into the trade's escrow (platform accounts). Recording one
//     reserves it against the shared counter, so a player whose trades
//     together promise more than it holds has the last one refused,
//     wherever the trades were opened, and the refused trade is cancelled.
//  2. the end, in the trade's scope, one key for commit and cancel alike:
//     the escrow to what each side is owed (a commit: the other side's
//     offer; a cancel: its own offer back). This is the decision; it
//     touches platform accounts only, so no settle can refuse it, and its
//     one key means a trade ends once whatever is sent.
//  3. claim a and claim b, each in its player's scope: what the side is
//     owed into its wallets.
//
// Keeping every wallet's credits and debits in its player's scope is what
// makes a settle never refuse an accepted movement (see econ.go).
//
// A trade is cancelled when either player asks, when an offer is refused,
// when the partner is no longer within TradeRange of the deciding master
// (as that node sees it: a partner out of its sight is out of range; for
// awayTicks in a row, since a handoff hides an entity for a tick or two),
// and when either player logs out (the deciding master's trades are then
// run to their end by its node without it). The end waits for every offer
// sent to be answered, so a cancel returns exactly what was reserved.
//
// The economy decides what a dead decider leaves (econ/escrow.go): an
// escrow whose end has no answer EscrowBound after its first offer is
// cancelled by the economy (the offers not answered yet refused for ever,
// ESCROW.EXPIRED), and an ended one's missing claims paid. The first end
// recorded decides: the economy answers an end with other legs REJECTED,
// ESCROW.DECIDED. A trade resumed on a standby from an older checkpoint
// therefore finishes (its steps are idempotent by key) or learns the
// other decision from its end's answer (Overruled), claims what that
// decision owes, and tells the partner in its notice. The deciding node
// itself cancels a trade still open after TradeTimeout (CancelExpired),
// below the economy's bound, so that a live trade is decided by its
// players or its node, not by the economy; and the partner's copy of a
// trade whose decider went silent is dropped after twice that.
//
// An offer is the one step netting may refuse. A key keeps its first
// answer (since netting's port v4 a refusal is remembered too, so a resend
// cannot turn a refusal into an acceptance); still, only one attempt of
// it may be undecided at a time: an answer that comes back
// after the master has moved on is sent after it (TradeAnswer), and the
// node that holds the trade sends it again (the same key) only after
// ResubmitAfter without an answer, when no earlier attempt can still be
// decided; only the latest attempt's answer counts. The end and the
// claims cannot be refused, so they are sent again at once wherever the
// trade is.

import (
	"encoding/binary"
	"errors"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// Offer is what one side of a trade gives: coins and a count of one good.
type Offer struct {
	Coins int64
	Good  Good
	Count int64
}

// assets appends o's nonzero parts as (asset, amount).
func (o Offer) assets(dst []assetAmount) []assetAmount {
	if o.Coins > 0 {
		dst = append(dst, assetAmount{noGood, o.Coins})
	}
	if o.Count > 0 {
		dst = append(dst, assetAmount{o.Good, o.Count})
	}
	return dst
}

type assetAmount struct {
	asset  Good
	amount int64
}

// TradePhase is where a trade stands.
type TradePhase uint8

// Trade phases.
const (
	// TradeOpen: offers are made and reserved, and accepted.
	TradeOpen TradePhase = iota + 1
	// TradeCommitting and TradeCancelling: decided; the end is recorded
	// once no offer waits for its answer.
	TradeCommitting
	TradeCancelling
	// TradeClaiming: ended; each side's claim is recorded.
	TradeClaiming
	// TradeDone: every movement recorded (only ever seen in a notice).
	TradeDone
)

// CancelReason says why a trade was cancelled.
type CancelReason uint8

// Reasons of a cancel.
const (
	CancelAsked   CancelReason = iota + 1 // a player asked
	CancelRange                           // the partner was out of range or out of sight
	CancelRefused                         // an offer was refused: it promised more than the player holds
	CancelGone                            // a player logged out
	// CancelExpired: the trade stayed open past TradeTimeout, or the
	// economy closed its escrow (its decider left it past the economy's
	// bound).
	CancelExpired
)

// StepStatus is where one of a trade's movements stands.
type StepStatus uint8

// Step statuses.
const (
	StepNone    StepStatus = iota // not sent
	StepPending                   // sent, no answer applied yet
	StepDone                      // accepted (or nothing to move)
	StepRefused                   // an offer the economy refused
	StepFailed                    // refused as malformed: a bug, logged
	// StepExpired: an offer the economy refused because it closed the
	// trade's escrow (ESCROW.EXPIRED).
	StepExpired
)

// Step is one of a trade's movements.
type Step struct {
	Status StepStatus
	// Attempt numbers the sendings; only the answer to the latest counts.
	Attempt uint32
	// Waited counts the ticks the holder has waited for an answer with no
	// attempt of its own in flight (sent by a node the trade left, or
	// given up on as unknown).
	Waited uint32
}

type tradeStep uint8

const (
	stepOfferA tradeStep = iota
	stepOfferB
	stepEnd
	stepClaimA
	stepClaimB
	numSteps
)

var stepNames = [numSteps]string{"offer:a", "offer:b", "end", "claim:a", "claim:b"}

// TradeSide is one side of a trade.
type TradeSide struct {
	Master  ecs.ID
	Account account.ID // 0 until the side's first request (side b)
	Offer   Offer
	// Offered: the side made its offer (once per trade); Accepted: it
	// accepted both offers as they stand.
	Offered, Accepted bool
}

// Trade is one trade, as its deciding master holds it (Decides) or as its
// partner's copy from the last notice.
type Trade struct {
	ID      uint64
	Decides bool
	Phase   TradePhase
	// Commit is the decision, once the phase is past TradeOpen.
	Commit bool
	// Cancel is set by a cancel asked for while open; Reason says why.
	Cancel bool
	Reason CancelReason
	// A decides (the lower master id); B is its partner.
	A, B  TradeSide
	Steps [numSteps]Step
	// Away counts the ticks in a row the partner was out of range or out
	// of sight of the deciding master.
	Away uint8
	// Overruled: the economy's journal held the other decision when this
	// trade's end was sent (the economy cancelled it past its bound, or an
	// earlier run of the decider, lost with its node, decided first); the
	// trade ended as the journal says.
	Overruled bool
	// Age counts the ticks the trade has been open (the decider's), or,
	// on a partner's copy, the ticks since its last notice.
	Age uint32
}

// Trades are a master's trades: those it decides and the copies of those
// its partners decide (at most MaxTrades of each). Not synced; handed
// over.
type Trades struct{ List []Trade }

// MaxTrades bounds a master's open trades it decides, and its copies.
const MaxTrades = 8

// tradeSize is the fixed encoding's size of a Trade.
var tradeSize = binary.Size(Trade{})

// tradesCodec is the handoff codec of Trades: a uvarint count, then each
// trade in encoding/binary's fixed little-endian layout.
var tradesCodec = zone.Codec[Trades]{
	Append: func(dst []byte, t *Trades) []byte {
		dst = binary.AppendUvarint(dst, uint64(len(t.List)))
		for i := range t.List {
			dst, _ = binary.Append(dst, binary.LittleEndian, &t.List[i])
		}
		return dst
	},
	Decode: func(b []byte) (Trades, error) {
		var t Trades
		n, k := uvarint(b)
		if k <= 0 || n > 2*MaxTrades || uint64(len(b)-k) != n*uint64(tradeSize) {
			return t, zone.ErrMalformedState.Wrap("trades of %d bytes", len(b))
		}
		b = b[k:]
		for range n {
			tr, err := decodeTrade(b[:tradeSize])
			if err != nil {
				return Trades{}, err
			}
			t.List = append(t.List, tr)
			b = b[tradeSize:]
		}
		return t, nil
	},
}

func decodeTrade(b []byte) (Trade, error) {
	var t Trade
	if n, err := binary.Decode(b, binary.LittleEndian, &t); err != nil || n != len(b) {
		return t, zone.ErrMalformedState.Wrap("trade of %d bytes", len(b))
	}
	return t, nil
}

// Accounts of a trade (see econ.go).

// The names are econ's escrow convention (econ/escrow.go), which the
// economy's sweep reads back: an owed account names the wallet it pays.

func escrowAccount(trade uint64, g Good) string { return econ.EscrowAccount(trade, assetName(g)) }

func owedAccount(trade uint64, side byte, a account.ID, g Good) string {
	return econ.EscrowOwedAccount(trade, side, walletAccount(a, g))
}

// stepKey is the movement key of a trade's step.
func stepKey(trade uint64, s tradeStep) string { return econ.EscrowKey(trade, stepNames[s]) }

func (t *Trade) side(s tradeStep) *TradeSide {
	if s == stepOfferA || s == stepClaimA {
		return &t.A
	}
	return &t.B
}

// reserved reports whether side a's (or b's) offer is in the escrow.
func (t *Trade) reserved(a bool) bool {
	if a {
		return t.Steps[stepOfferA].Status == StepDone
	}
	return t.Steps[stepOfferB].Status == StepDone
}

// owed is what side a (or b) is owed once the trade ended.
func (t *Trade) owed(a bool) Offer {
	switch {
	case t.Commit && a:
		return t.B.Offer
	case t.Commit:
		return t.A.Offer
	case t.reserved(a) && a:
		return t.A.Offer
	case t.reserved(a):
		return t.B.Offer
	}
	return Offer{}
}

// movement returns step s's scope and movement; ok is false when there is
// nothing to move (an empty offer, nothing owed).
func (t *Trade) movement(s tradeStep) (scope string, m netting.Movement, ok bool) {
	var legs []ledger.Leg
	var buf [2]assetAmount
	switch s {
	case stepOfferA, stepOfferB:
		side := t.side(s)
		scope = PlayerScope(side.Account)
		for _, x := range side.Offer.assets(buf[:0]) {
			legs = append(legs, ledger.Debit(walletAccount(side.Account, x.asset), x.amount), ledger.Credit(escrowAccount(t.ID, x.asset), x.amount))
		}
	case stepEnd:
		scope = TradeScope(t.ID)
		for _, a := range []bool{true, false} {
			if !t.reserved(a) {
				continue
			}
			off, to, who := t.A.Offer, byte('a'), t.A.Account
			if !a {
				off, to, who = t.B.Offer, 'b', t.B.Account
			}
			if t.Commit {
				to = 'a' + 'b' - to
				if who = t.A.Account; to == 'b' {
					who = t.B.Account
				}
			}
			for _, x := range off.assets(buf[:0]) {
				legs = append(legs, ledger.Debit(escrowAccount(t.ID, x.asset), x.amount), ledger.Credit(owedAccount(t.ID, to, who, x.asset), x.amount))
			}
		}
	case stepClaimA, stepClaimB:
		side, a, name := t.side(s), s == stepClaimA, byte('b')
		if a {
			name = 'a'
		}
		if side.Account == account.None {
			// A side this trade never heard from (a trade resumed from a
			// checkpoint older than the side's first request, told of a
			// commit by the economy): its wallet is not known here, and
			// the economy's sweep pays it from the end's owed account.
			break
		}
		scope = PlayerScope(side.Account)
		for _, x := range t.owed(a).assets(buf[:0]) {
			legs = append(legs, ledger.Debit(owedAccount(t.ID, name, side.Account, x.asset), x.amount), ledger.Credit(walletAccount(side.Account, x.asset), x.amount))
		}
	}
	return scope, netting.Movement{Key: stepKey(t.ID, s), Legs: legs}, len(legs) > 0
}

// cancel decides an open trade's cancel.
func (t *Trade) cancel(why CancelReason) {
	if t.Phase == TradeOpen {
		t.Phase, t.Commit = TradeCancelling, false
		if !t.Cancel {
			t.Cancel, t.Reason = true, why
		}
	}
}

// signature is what a notice tells the partner: everything but the
// waiting counters.
func (t *Trade) signature() Trade {
	s := *t
	for i := range s.Steps {
		s.Steps[i].Waited = 0
	}
	s.Away, s.Age = 0, 0
	return s
}

// ---- the deciding side ----

// Trade request operations (TradeRequest's first byte).
const (
	opOffer byte = iota + 1
	opAccept
	opCancel
	// The partner's node cancels: its player logs out.
	opCancelGone
)

// tradeInput applies a player's trade input: on the trade itself if its
// master decides, else as a request to the partner's master, which does.
func (g *Game) tradeInput(me, partner ecs.ID, op byte, o Offer) {
	a, ok := g.accountFor(me)
	if !ok || partner == me || partner == 0 {
		return
	}
	if me < partner {
		g.decide(me, partner, op, a, o)
		return
	}
	g.r.Send(zone.Intent{Kind: TradeRequest, Source: me, Target: partner, Data: encodeRequest(op, a, o)})
}

// encodeRequest is TradeRequest's data: op, then uvarints of the account,
// the coins, the good and the count.
func encodeRequest(op byte, a account.ID, o Offer) []byte {
	b := []byte{op}
	b = binary.AppendUvarint(b, uint64(a))
	b = binary.AppendUvarint(b, uint64(o.Coins))
	b = binary.AppendUvarint(b, uint64(o.Good))
	return binary.AppendUvarint(b, uint64(o.Count))
}

var errRequest = errors.New("game: malformed trade request")

func decodeRequest(b []byte) (op byte, a account.ID, o Offer, err error) {
	if len(b) < 1 {
		return 0, 0, o, errRequest
	}
	op, b = b[0], b[1:]
	var v [4]uint64
	for i := range v {
		x, n := uvarint(b)
		if n <= 0 || x > maxAmount {
			return 0, 0, o, errRequest
		}
		v[i], b = x, b[n:]
	}
	o = Offer{Coins: int64(v[1]), Good: Good(v[2]), Count: int64(v[3])}
	if len(b) != 0 || op < opOffer || op > opCancelGone || v[0] == 0 || v[2] > uint64(Sword) || (o.Count > 0) != o.Good.Valid() {
		return 0, 0, Offer{}, errRequest
	}
	return op, account.ID(v[0]), o, nil
}

func (g *Game) applyTradeRequest(in zone.Intent) {
	op, a, o, err := decodeRequest(in.Data)
	if err != nil || in.Source <= in.Target || g.econ.pool == nil {
		return
	}
	g.decideFor(in.Target, in.Source, op, a, o)
}

// decide applies the deciding master's own operation on its trade with
// partner; decideFor applies the partner's.
func (g *Game) decide(me, partner ecs.ID, op byte, a account.ID, o Offer) {
	g.operate(me, partner, op, a, o, false)
}

func (g *Game) decideFor(me, partner ecs.ID, op byte, a account.ID, o Offer) {
	g.operate(me, partner, op, a, o, true)
}

func (g *Game) operate(me, partner ecs.ID, op byte, a account.ID, o Offer, byPartner bool) {
	tr, ok := g.econ.trades.Get(me)
	p, okPos := g.c.pos.Get(me)
	if !ok || !okPos {
		return
	}
	var t *Trade
	for i := range tr.List {
		if x := &tr.List[i]; x.Decides && x.Phase == TradeOpen && x.B.Master == partner {
			t = x
			break
		}
	}
	if t == nil {
		if op != opOffer || decided(tr) >= MaxTrades || !g.inTradeRange(p.Pos, partner) {
			return
		}
		mine, ok := g.accountFor(me)
		if !ok {
			return
		}
		id, err := g.r.NewID()
		if err != nil {
			return
		}
		tr.List = append(tr.List, Trade{ID: uint64(id), Decides: true, Phase: TradeOpen,
			A: TradeSide{Master: me, Account: mine}, B: TradeSide{Master: partner}})
		t = &tr.List[len(tr.List)-1]
	}
	side := &t.A
	if byPartner {
		side = &t.B
		if side.Account == account.None {
			side.Account = a
		}
	}
	switch op {
	case opOffer:
		if !side.Offered {
			side.Offer, side.Offered = o, true
		}
	case opAccept:
		if t.A.Offered && t.B.Offered {
			side.Accepted = true
		}
	case opCancel, opCancelGone:
		if !t.Cancel {
			t.Cancel, t.Reason = true, CancelAsked
			if op == opCancelGone {
				t.Reason = CancelGone
			}
		}
	}
	g.notice(t)
}

// inTradeRange reports whether partner, a player's master this node can
// see (simulated here or a simulation ghost), stands within TradeRange of
// p.
func (g *Game) inTradeRange(p torus.Pos, partner ecs.ID) bool {
	v, ok := g.c.visual.Get(partner)
	if !ok || v.Kind != KindPlayer {
		return false
	}
	q, ok := g.c.pos.Get(partner)
	return ok && g.geo.Within(p, q.Pos, g.cfg.Economy.TradeRange)
}

// awayTicks is how long the other side of a trade may be out of range or
// out of sight before the trade is cancelled: a handoff hides an entity
// from its old and new node's world for a tick or two.
const awayTicks = 10

// away counts a tick of the partner other being out of range of p (or
// out of sight), and reports whether it has been for awayTicks.
func (g *Game) away(t *Trade, p torus.Pos, other ecs.ID) bool {
	if g.inTradeRange(p, other) {
		t.Away = 0
		return false
	}
	if t.Away < awayTicks {
		t.Away++
	}
	return t.Away >= awayTicks
}

// notice sends the trade's state to the partner's master.
func (g *Game) notice(t *Trade) {
	s := t.signature()
	s.Decides = false
	data, _ := binary.Append(nil, binary.LittleEndian, &s)
	g.r.Send(zone.Intent{Kind: TradeNotice, Source: t.A.Master, Target: t.B.Master, Data: data})
}

// driveTrades advances the trades the master id standing at p decides.
func (g *Game) driveTrades(id ecs.ID, tr *Trades, p torus.Pos) {
	kept := tr.List[:0]
	for i := range tr.List {
		t := &tr.List[i]
		if !t.Decides {
			// A copy: its decider judges the range (this node may not see
			// the decider when it stands in one of this node's regions
			// before its handoff), and its last notice ends it; a decider
			// silent for twice TradeTimeout is gone (its node died and
			// its standby's checkpoint did not have the trade): the
			// economy decides the money, and the copy goes.
			if t.Age++; t.Age < 2*g.econ.timeoutTicks {
				kept = append(kept, *t)
			}
			continue
		}
		if t.Phase == TradeOpen && g.away(t, p, t.B.Master) {
			t.cancel(CancelRange)
		}
		if t.Phase == TradeOpen {
			if t.Age++; t.Age >= g.econ.timeoutTicks {
				t.cancel(CancelExpired)
			}
		}
		if g.drive(t) {
			kept = append(kept, *t)
		}
	}
	clear(tr.List[len(kept):])
	tr.List = kept
}

// driveOrphans runs the trades whose deciding master logged out here to
// their end.
func (g *Game) driveOrphans() {
	kept := g.econ.orphans[:0]
	for i := range g.econ.orphans {
		t := &g.econ.orphans[i]
		if g.drive(t) {
			kept = append(kept, *t)
		}
	}
	clear(g.econ.orphans[len(kept):])
	g.econ.orphans = kept
}

// drive advances a trade this node decides by as many steps as it can take
// now, and reports whether the trade goes on (false: done).
func (g *Game) drive(t *Trade) bool {
	before := t.signature()
	if t.Phase == TradeOpen && t.Cancel {
		t.cancel(t.Reason)
	}
	if t.Phase == TradeOpen {
		for _, s := range []tradeStep{stepOfferA, stepOfferB} {
			if t.side(s).Offered && t.Steps[s].Status == StepNone {
				g.sendStep(t, s)
			}
			switch t.Steps[s].Status {
			case StepRefused, StepFailed:
				t.cancel(CancelRefused)
			case StepExpired:
				t.cancel(CancelExpired)
			}
		}
		if t.Phase == TradeOpen && t.reserved(true) && t.reserved(false) && t.A.Accepted && t.B.Accepted {
			t.Phase, t.Commit = TradeCommitting, true
		}
	}
	if (t.Phase == TradeCommitting || t.Phase == TradeCancelling) &&
		t.Steps[stepOfferA].Status != StepPending && t.Steps[stepOfferB].Status != StepPending {
		if t.Steps[stepEnd].Status == StepNone {
			g.sendStep(t, stepEnd)
		}
		if t.Steps[stepEnd].Status == StepDone {
			t.Phase = TradeClaiming
		}
	}
	if t.Phase == TradeClaiming {
		for _, s := range []tradeStep{stepClaimA, stepClaimB} {
			if t.Steps[s].Status == StepNone {
				g.sendStep(t, s)
			}
		}
		if t.Steps[stepClaimA].Status == StepDone && t.Steps[stepClaimB].Status == StepDone {
			t.Phase = TradeDone
			if t.Commit {
				g.econ.stats.Committed++
			} else {
				g.econ.stats.Cancelled++
			}
			if g.econ.onTradeEnd != nil {
				g.econ.onTradeEnd(*t)
			}
		}
	}
	g.sendAgain(t)
	if t.signature() != before {
		g.notice(t)
	}
	return t.Phase != TradeDone
}

// sendStep records step s of t, or marks it done when it moves nothing.
func (g *Game) sendStep(t *Trade, s tradeStep) {
	st := &t.Steps[s]
	scope, m, ok := t.movement(s)
	if !ok {
		st.Status = StepDone
		return
	}
	st.Status, st.Waited = StepPending, 0
	st.Attempt++
	g.econ.inflight[m.Key] = st.Attempt
	g.submit(&econJob{kind: jobTrade, scope: scope, mv: m, master: t.A.Master, trade: t.ID, step: s, attempt: st.Attempt})
}

// sendAgain sends again the pending steps no worker of this node has:
// the end and the claims at once, an offer after ResubmitAfter (see the
// comment at the top).
func (g *Game) sendAgain(t *Trade) {
	for s := range numSteps {
		st := &t.Steps[s]
		if st.Status != StepPending {
			continue
		}
		if a, ok := g.econ.inflight[stepKey(t.ID, s)]; ok && a == st.Attempt {
			continue
		}
		st.Waited++
		offer := s == stepOfferA || s == stepOfferB
		if !offer || st.Waited >= g.econ.resubmitTicks {
			g.econ.stats.Resubmitted++
			g.sendStep(t, s)
		}
	}
}

// answer applies the economy's answer to attempt of step s, if it is the
// latest attempt and still waited for.
func (t *Trade) answer(s tradeStep, attempt uint32, status uint8) bool {
	st := &t.Steps[s]
	if st.Status != StepPending || st.Attempt != attempt {
		return false
	}
	offer := s == stepOfferA || s == stepOfferB
	switch {
	case status == answerAccepted:
		st.Status = StepDone
	case status == answerRejected && offer:
		st.Status = StepRefused
	case status == answerExpired && offer:
		st.Status = StepExpired
	case status == answerDecided && s == stepEnd:
		// The journal holds the other decision. The end names exactly the
		// offers journaled (it waits for every offer's answer, and an
		// unanswered one was refused for ever by the economy's close), so
		// two ends of one trade differ only in commit or cancel: the
		// other one is the journal's. Its claims are what that decision
		// owes; a part this trade does not know (an offer it never heard
		// of) is paid by the economy's sweep instead.
		t.Commit, t.Overruled = !t.Commit, true
		switch {
		case t.Commit:
			t.Cancel, t.Reason = false, 0 // the cancel it asked for came too late
		case !t.Cancel:
			t.Cancel, t.Reason = true, CancelExpired
		}
		st.Status = StepDone
	case status == answerFailed:
		st.Status = StepFailed
	}
	// Otherwise (unknown, or a refusal no such step can get) the step
	// stays pending with nothing in flight: sendAgain sends it again.
	return true
}

// tradeAnswer applies a worker's answer to the trade it concerns: held by
// master here, an orphan here, or sent after master to the node that holds
// it now.
func (g *Game) tradeAnswer(master ecs.ID, trade uint64, s tradeStep, attempt uint32, status uint8) {
	if t := g.heldTrade(master, trade); t != nil {
		g.applyAnswer(t, s, attempt, status)
		return
	}
	for i := range g.econ.orphans {
		if t := &g.econ.orphans[i]; t.ID == trade {
			g.applyAnswer(t, s, attempt, status)
			return
		}
	}
	if g.r.Simulated(master) {
		return // the trade is over
	}
	g.econ.stats.Forwarded++
	g.r.Send(zone.Intent{Kind: TradeAnswer, Target: master, Data: encodeAnswer(trade, s, attempt, status)})
}

func (g *Game) applyAnswer(t *Trade, s tradeStep, attempt uint32, status uint8) {
	if !t.answer(s, attempt, status) {
		return
	}
	g.notice(t)
	if t.Steps[s].Status != StepDone {
		return
	}
	switch s {
	case stepOfferA, stepClaimA:
		g.purseChanged(t.A.Master)
	case stepOfferB, stepClaimB:
		g.purseChanged(t.B.Master)
	}
}

// heldTrade is the trade master decides, if master is simulated here.
func (g *Game) heldTrade(master ecs.ID, trade uint64) *Trade {
	if !g.r.Simulated(master) {
		return nil
	}
	tr, ok := g.econ.trades.Get(master)
	if !ok {
		return nil
	}
	for i := range tr.List {
		if t := &tr.List[i]; t.ID == trade && t.Decides {
			return t
		}
	}
	return nil
}

// encodeAnswer is TradeAnswer's data: uvarints of the trade, the step and
// the attempt, then the status byte.
func encodeAnswer(trade uint64, s tradeStep, attempt uint32, status uint8) []byte {
	b := binary.AppendUvarint(nil, trade)
	b = binary.AppendUvarint(b, uint64(s))
	b = binary.AppendUvarint(b, uint64(attempt))
	return append(b, status)
}

func (g *Game) applyTradeAnswer(in zone.Intent) {
	b := in.Data
	var v [3]uint64
	for i := range v {
		x, n := uvarint(b)
		if n <= 0 {
			return
		}
		v[i], b = x, b[n:]
	}
	if len(b) != 1 || v[1] >= uint64(numSteps) || v[2] > 1<<32-1 {
		return
	}
	if t := g.heldTrade(in.Target, v[0]); t != nil {
		g.applyAnswer(t, tradeStep(v[1]), uint32(v[2]), b[0])
	}
}

// applyTradeNotice keeps the partner's copy of a trade.
func (g *Game) applyTradeNotice(in zone.Intent) {
	if g.econ.pool == nil || len(in.Data) != tradeSize {
		return
	}
	t, err := decodeTrade(in.Data)
	tr, ok := g.econ.trades.Get(in.Target)
	if err != nil || !ok || t.B.Master != in.Target || t.A.Master != in.Source {
		return
	}
	for i := range tr.List {
		if x := &tr.List[i]; x.ID == t.ID && !x.Decides {
			if t.Phase == TradeDone {
				tr.List = append(tr.List[:i], tr.List[i+1:]...)
			} else {
				*x = t
			}
			return
		}
	}
	if t.Phase == TradeDone {
		return
	}
	if len(tr.List)-decided(tr) >= MaxTrades {
		// Too many copies (notices of their end lost): the oldest goes.
		for i := range tr.List {
			if !tr.List[i].Decides {
				tr.List = append(tr.List[:i], tr.List[i+1:]...)
				break
			}
		}
	}
	tr.List = append(tr.List, t)
}

// decided counts the trades of tr its master decides.
func decided(tr *Trades) int {
	n := 0
	for i := range tr.List {
		if tr.List[i].Decides {
			n++
		}
	}
	return n
}

// leaveTrades hands a logging-out master's trades on: those it decides are
// cancelled and run to their end here without it, and the deciders of the
// others are asked to cancel (removePlayer).
func (g *Game) leaveTrades(master ecs.ID) {
	if g.econ.pool == nil {
		return
	}
	tr, ok := g.econ.trades.Get(master)
	if !ok {
		return
	}
	for i := range tr.List {
		t := tr.List[i]
		if !t.Decides {
			g.r.Send(zone.Intent{Kind: TradeRequest, Source: master, Target: t.A.Master, Data: encodeRequest(opCancelGone, t.B.Account, Offer{})})
			continue
		}
		if t.Phase == TradeOpen {
			t.cancel(CancelGone)
		}
		g.econ.orphans = append(g.econ.orphans, t)
	}
	tr.List = nil
}

// TradesOf returns the trades of a master simulated here (a copy).
func (g *Game) TradesOf(master ecs.ID) []Trade {
	if g.econ.trades == nil {
		return nil
	}
	tr, ok := g.econ.trades.Get(master)
	if !ok {
		return nil
	}
	return append([]Trade(nil), tr.List...)
}

// OpenTrades returns how many trades this node decides and has not ended,
// orphans included.
func (g *Game) OpenTrades() int {
	n := len(g.econ.orphans)
	if g.econ.tradeQ != nil {
		g.econ.tradeQ.Each(func(_ ecs.ID, tr *Trades, _ *Position) {
			for i := range tr.List {
				if tr.List[i].Decides {
					n++
				}
			}
		})
	}
	return n
}
