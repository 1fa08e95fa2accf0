package game

// The game's economy. The zone node never writes money: every change of a
// player's coins or goods is a movement (netting.Movement) recorded on the
// economy cluster (package econ) through the Economy port, off the world
// goroutine, by a small pool of workers the Game owns (Close joins them).
// A worker retries an attempt whose outcome it cannot learn with the same
// key, so no movement counts twice; its answer comes back to the world
// through zone.Runtime.Post and is applied at the start of the next tick.
//
// Accounts (ledger names; "platform:" accounts may go below zero, every
// other account is a wallet that never does):
//
//	player:<account>:coins           a player's coins
//	player:<account>:good:<n>        a player's count of good n (Goods)
//	platform:game:loot               where dropped coins come from
//	platform:game:shop:coins         what the shops took in
//	platform:game:shop:good:<n>      where the goods shops sell come from
//	platform:trade:<id>:escrow:<a>   a trade's offers, held (a = coins | good:<n>)
//	platform:trade:<id>:to:<s>:<w>   what a trade owes side s (a or b) once decided,
//	                                 to be paid into the side's wallet w (econ's
//	                                 escrow convention: the economy can pay it)
//
// Scopes (the single writer of each on the economy cluster):
//
//	player:<account>  every movement that changes that player's wallets:
//	                  loot, purchases, the player's trade offers and claims
//	trade:<id>        a trade's end, its commit or its cancel
//
// Why per player (docs/decisions.md, "Decisions: the game's economy"):
// netting lets a wallet spend credits its sessions have accepted but not
// settled, and a session that settles before the session holding the
// credit it spent is refused at settle (replayed, the movement rejected
// after it was accepted). Sessions of one scope settle one after
// another, so keeping every credit and debit of a wallet in its owner's
// scope keeps that from happening; a trade's own accounts are platform
// accounts, which no settle refuses, so the trade's end can live in a
// scope of its own.
//
// Keys are unique across the economy because entity ids are never reused:
// loot:<mob> (a mob dies once), buy:<id> (an id minted for the purchase),
// trade:<id>:offer:<s>, trade:<id>:end, trade:<id>:claim:<s>.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/zone"
)

// Economy is the port to the economy cluster: it records a movement under
// a scope on the node that owns the scope. *econ.Node (for a scope it
// owns), econ's gRPC client and NodeRouter satisfy it. An error is either
// a refusal of the movement itself (ledger.IsRefusal: malformed or
// unbalanced, never retried) or an outcome the caller does not know yet,
// which the game retries with the same key.
type Economy interface {
	Record(ctx context.Context, scope string, m netting.Movement) (netting.Outcome, error)
}

// EconomyReader is the optional reading side of an Economy: what each
// account can spend now (its settled balance plus the changes of accepted,
// unsettled movements), in the order asked. An Economy that has it lets
// the game show each player its purse (Purse).
type EconomyReader interface {
	Holdings(ctx context.Context, accounts []string) ([]int64, error)
}

// EconomyConfig configures the game's economy (Config.Economy). Zero
// fields take the defaults documented on them.
type EconomyConfig struct {
	// Ledger is the economy cluster. nil: the game has no economy (no
	// loot, shops or trades; the economy's inputs are accepted and do
	// nothing).
	Ledger Economy
	// Workers is how many goroutines call Ledger. Default 4.
	Workers int
	// Backlog bounds the movements waiting for a worker; past it a new
	// loot or purchase is dropped and counted (a trade's steps are
	// submitted again by the trade itself). Default 4096.
	Backlog int
	// AttemptTimeout bounds one call of Ledger. Default 5s.
	AttemptTimeout time.Duration
	// CallDeadline bounds the retries of one movement; past it the
	// outcome is reported unknown (a trade then submits it again, with
	// the same key). Default 30s.
	CallDeadline time.Duration
	// RetryMin and RetryMax bound the backoff between attempts. Defaults
	// 20ms and 1s.
	RetryMin, RetryMax time.Duration
	// ResubmitAfter: a trade offer whose outcome never came back to the
	// node now holding the trade (the node that sent it lost it, or the
	// answer could not follow the player) is sent again after this long.
	// It must exceed the longest an earlier attempt can still be decided
	// on the economy cluster (CallDeadline plus the nodes' commit
	// timeout), since netting lets a key refused once be accepted later
	// and two senders of one offer could then disagree. Default
	// 2×CallDeadline + 30s.
	ResubmitAfter time.Duration
	// LootCoins is what a mob drops, to its killer. Default 10.
	LootCoins int64
	// TradeRange: a trade lasts while the partners stand this close
	// (metres). Default 10, the seed's.
	TradeRange float64
	// ShopReach: a player buys from a den's keeper this close. Default 8.
	ShopReach float64
	// TradeTimeout: a trade still open this long after it was opened is
	// cancelled by its deciding node (CancelExpired). Keep it below the
	// economy nodes' escrow bound (econ.Config.EscrowBound, default 30s),
	// past which the economy cancels a trade's escrow itself. Default 20s.
	TradeTimeout time.Duration
	// Clock times the backoff and the deadline. Default clock.Real().
	Clock clock.Clock
}

func (c EconomyConfig) withDefaults() EconomyConfig {
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.Backlog == 0 {
		c.Backlog = 4096
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 5 * time.Second
	}
	if c.CallDeadline == 0 {
		c.CallDeadline = 30 * time.Second
	}
	if c.RetryMin == 0 {
		c.RetryMin = 20 * time.Millisecond
	}
	if c.RetryMax == 0 {
		c.RetryMax = time.Second
	}
	if c.ResubmitAfter == 0 {
		c.ResubmitAfter = 2*c.CallDeadline + 30*time.Second
	}
	if c.LootCoins == 0 {
		c.LootCoins = 10
	}
	if c.TradeRange == 0 {
		c.TradeRange = 10
	}
	if c.ShopReach == 0 {
		c.ShopReach = 8
	}
	if c.TradeTimeout == 0 {
		c.TradeTimeout = 20 * time.Second
	}
	c.Clock = clock.OrReal(c.Clock)
	return c
}

func (c EconomyConfig) validate() error {
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"Economy.AttemptTimeout", c.AttemptTimeout}, {"Economy.CallDeadline", c.CallDeadline},
		{"Economy.RetryMin", c.RetryMin}, {"Economy.RetryMax", c.RetryMax}, {"Economy.ResubmitAfter", c.ResubmitAfter},
		{"Economy.TradeTimeout", c.TradeTimeout},
	} {
		if d.v <= 0 {
			return errcode.Config(d.field, d.v.String(), "must be positive")
		}
	}
	switch {
	case c.Workers < 1:
		return errcode.Config("Economy.Workers", c.Workers, "must be at least 1")
	case c.Backlog < 1:
		return errcode.Config("Economy.Backlog", c.Backlog, "must be at least 1")
	case c.RetryMax < c.RetryMin:
		return errcode.Config("Economy.RetryMax", c.RetryMax.String(), "must not be below RetryMin")
	case c.ResubmitAfter <= c.CallDeadline:
		return errcode.Config("Economy.ResubmitAfter", c.ResubmitAfter.String(), fmt.Sprintf("must exceed CallDeadline (%s)", c.CallDeadline))
	case c.LootCoins < 0 || c.LootCoins > maxAmount:
		return errcode.Config("Economy.LootCoins", c.LootCoins, fmt.Sprintf("must be within [0, %d]", maxAmount))
	case c.TradeRange <= 0:
		return errcode.Config("Economy.TradeRange", c.TradeRange, "must be positive")
	case c.ShopReach <= 0:
		return errcode.Config("Economy.ShopReach", c.ShopReach, "must be positive")
	}
	return nil
}

// maxAmount bounds every amount the game moves (coins or a count of goods
// in one movement), so no sum of legs can overflow.
const maxAmount = 1 << 40

// Names of the economy's scopes and accounts (see the comment at the top).

// PlayerScope is the scope of every movement that changes a's wallets.
func PlayerScope(a account.ID) string { return "player:" + a.String() }

// TradeScope is the scope of a trade's end.
func TradeScope(trade uint64) string { return econ.EscrowScope(trade) }

// CoinsAccount is a player's coins.
func CoinsAccount(a account.ID) string { return "player:" + a.String() + ":coins" }

// GoodsAccount is a player's count of good g.
func GoodsAccount(a account.ID, g Good) string {
	return "player:" + a.String() + ":good:" + strconv.Itoa(int(g))
}

// Platform accounts of the game.
const (
	LootAccount      = "platform:game:loot"
	ShopCoinsAccount = "platform:game:shop:coins"
)

// ShopGoodsAccount is where the goods of kind g that shops sell come from.
func ShopGoodsAccount(g Good) string { return "platform:game:shop:good:" + strconv.Itoa(int(g)) }

// assetName is "coins" for coins (Good 0) and "good:<n>" for a good.
func assetName(g Good) string {
	if g == noGood {
		return "coins"
	}
	return "good:" + strconv.Itoa(int(g))
}

// walletAccount is a's account of asset g (coins for noGood).
func walletAccount(a account.ID, g Good) string {
	if g == noGood {
		return CoinsAccount(a)
	}
	return GoodsAccount(a, g)
}

// HoldingsAccounts are the accounts a purse shows, in Purse order: coins,
// then each good of Goods.
func HoldingsAccounts(a account.ID) []string {
	out := []string{CoinsAccount(a)}
	for _, g := range Goods {
		out = append(out, GoodsAccount(a, g))
	}
	return out
}

// EconomyStats count the economy's work on this node since New. Read them
// on the world goroutine.
type EconomyStats struct {
	// Submitted counts movements handed to the workers; Accepted and
	// Rejected their definite answers; Unknown those given up on without
	// one (submitted again by a trade, lost for a loot or a purchase);
	// Failed those the economy refused as malformed (a bug).
	Submitted, Accepted, Rejected, Unknown, Failed int
	// Dropped counts loot and purchases refused by a full backlog.
	Dropped int
	// Retries counts attempts after the first (every worker's).
	Retries int64
	// Kills counts mobs that died here by a player's blow, each dropping
	// its loot once.
	Kills int
	// Loot counts loot movements accepted; Bought and Refused purchases
	// accepted and refused for want of coins.
	Loot, Bought, Refused int
	// Trades counts trades ended here: Committed and Cancelled.
	Committed, Cancelled int
	// Forwarded counts trade answers sent on to the node the trade moved
	// to; Resubmitted the trade steps sent again.
	Forwarded, Resubmitted int
}

// EconomyStats returns the economy's counters (on the world goroutine).
func (g *Game) EconomyStats() EconomyStats {
	s := g.econ.stats
	if g.econ.pool != nil {
		s.Retries = g.econ.pool.retries.Load()
	}
	return s
}

// econState is the game's economy on this node, owned by the world
// goroutine (the pool's workers only read their jobs).
type econState struct {
	pool  *econPool
	stats EconomyStats
	// backlog holds jobs no worker could take yet.
	backlog []*econJob
	// inflight maps a trade step's key to the attempt this node has with
	// the workers.
	inflight map[string]uint32
	// reading is the purse reads in flight, by master.
	reading map[ecs.ID]uint8
	// orphans are trades this node decides whose master logged out: they
	// are cancelled and run to their end here.
	orphans []Trade
	// resubmitTicks is ResubmitAfter in ticks; timeoutTicks TradeTimeout.
	resubmitTicks, timeoutTicks uint32

	purse  *ecs.Store[Purse]
	trades *ecs.Store[Trades]
	tradeQ *ecs.Query2[Trades, Position]

	// onTradeEnd, if set, sees every trade this node ends (tests).
	onTradeEnd func(Trade)
}

// Close stops the economy's workers and waits for them: movements still
// waiting or in flight are abandoned (a movement abandoned mid-call may
// still be recorded, once). Idempotent; the game records nothing more.
// The zone runtime does not close its module, so whoever built the game
// closes it, after the runtime's last Step.
func (g *Game) Close() error {
	if g.econ.pool != nil {
		g.econ.pool.close()
	}
	return nil
}

// jobKind says what a movement is for, and so what its answer changes.
type jobKind uint8

const (
	jobLoot jobKind = iota + 1
	jobBuy
	jobTrade
	jobRead
)

// econJob is one call of the economy, built on the world goroutine and
// read-only afterwards.
type econJob struct {
	kind  jobKind
	scope string
	mv    netting.Movement
	// accounts are read (jobRead).
	accounts []string
	// Whom the answer concerns.
	master  ecs.ID
	acct    account.ID
	trade   uint64
	step    tradeStep
	attempt uint32
	// Purchase details, for the stats and the log.
	good  Good
	count int64
}

// Answer statuses of a job (and of a forwarded trade answer).
const (
	answerAccepted uint8 = iota + 1
	answerRejected
	answerUnknown
	answerFailed
	// answerExpired: an offer the economy refused because it closed the
	// trade's escrow (econ.ReasonEscrowExpired).
	answerExpired
	// answerDecided: a trade's end whose key the economy's journal holds
	// with the other decision (econ.ReasonEscrowDecided).
	answerDecided
)

type econResult struct {
	job      *econJob
	status   uint8
	out      netting.Outcome
	err      error
	holdings []int64
}

// econPool is the workers: a bounded channel of jobs, Workers goroutines,
// answers posted to the world goroutine. The goroutines start with the
// first job, so a game whose Setup failed has none to leak.
type econPool struct {
	cfg    EconomyConfig
	eco    Economy
	reader EconomyReader
	post   func(func())
	done   func(econResult)
	jobs   chan *econJob

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	retries atomic.Int64
	// out counts the jobs handed to the workers whose answers are not yet
	// posted to the world goroutine: a test paces its ticks on it.
	out atomic.Int64

	mu      sync.Mutex // orders start and close
	started bool
	closed  bool
}

func newEconPool(cfg EconomyConfig, post func(func()), done func(econResult)) *econPool {
	p := &econPool{cfg: cfg, eco: cfg.Ledger, post: post, done: done, jobs: make(chan *econJob, cfg.Workers*4)}
	p.reader, _ = cfg.Ledger.(EconomyReader)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// start launches the workers once; it reports false after close.
func (p *econPool) start() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if !p.started {
		p.started = true
		for range p.cfg.Workers {
			p.wg.Go(p.work)
		}
	}
	return true
}

func (p *econPool) work() {
	for {
		select {
		case <-p.ctx.Done():
			return
		case j := <-p.jobs:
			res := p.do(j)
			p.post(func() { p.done(res) })
			p.out.Add(-1)
		}
	}
}

// close stops the workers and waits for them. Idempotent.
func (p *econPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}

// offer hands j to a worker if one can take it now, never blocking the
// world goroutine.
func (p *econPool) offer(j *econJob) bool {
	if !p.start() {
		return false
	}
	p.out.Add(1)
	select {
	case p.jobs <- j:
		return true
	default:
		p.out.Add(-1)
		return false
	}
}

// do runs one job to a definite answer, a refusal of the movement itself,
// or the end of its deadline.
func (p *econPool) do(j *econJob) econResult {
	deadline := p.cfg.Clock.Now().Add(p.cfg.CallDeadline)
	backoff := p.cfg.RetryMin
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			p.retries.Add(1)
		}
		res := econResult{job: j}
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.AttemptTimeout)
		if j.kind == jobRead {
			res.holdings, res.err = p.reader.Holdings(ctx, j.accounts)
		} else {
			res.out, res.err = p.eco.Record(ctx, j.scope, j.mv)
		}
		cancel()
		switch {
		case res.err == nil && (j.kind == jobRead || res.out.Status == netting.Accepted):
			res.status = answerAccepted
			return res
		case res.err == nil:
			res.status = answerRejected
			switch res.out.Reason {
			case econ.ReasonEscrowExpired:
				res.status = answerExpired
			case econ.ReasonEscrowDecided:
				res.status = answerDecided
			}
			return res
		case ledger.IsRefusal(res.err):
			res.status = answerFailed
			return res
		}
		res.status = answerUnknown
		if p.ctx.Err() != nil || !p.cfg.Clock.Now().Add(backoff).Before(deadline) {
			return res
		}
		if clock.Sleep(p.ctx, p.cfg.Clock, backoff) != nil {
			return res
		}
		backoff = min(2*backoff, p.cfg.RetryMax)
	}
}

// setupEconomy registers the economy's components (always, so every
// node of a world has the same ones) and, if the game has an economy,
// its system and its workers (Setup).
func (g *Game) setupEconomy(r *zone.Runtime) error {
	var err error
	g.econ.purse = register(r, &err, zone.Spec[Purse]{Name: "purse", Wire: WirePurse, Handoff: zone.FixedCodec[Purse](),
		Audience: zone.OwnerOnly, Encode: encodePurse})
	g.econ.trades = register(r, &err, zone.Spec[Trades]{Name: "trades", Handoff: tradesCodec})
	if err != nil || g.cfg.Economy.Ledger == nil {
		return err
	}
	g.econ.tradeQ = zone.Query2(r, g.econ.trades, g.c.pos)
	if err := r.AddSystem(ecs.System{Name: "economy", Order: 45, Run: g.runEconomy}); err != nil {
		return err
	}
	g.econ.inflight = make(map[string]uint32)
	g.econ.reading = make(map[ecs.ID]uint8)
	g.econ.resubmitTicks = uint32(max(1, g.cfg.Economy.ResubmitAfter/g.cfg.TickInterval))
	g.econ.timeoutTicks = uint32(max(1, g.cfg.Economy.TradeTimeout/g.cfg.TickInterval))
	g.econ.pool = newEconPool(g.cfg.Economy, r.Post, g.econDone)
	return nil
}

// WirePurse is the wire type of Purse (owner only).
const WirePurse = 7

// runEconomy drives the trades this node holds and hands the tick's
// movements to the workers.
func (g *Game) runEconomy(w *ecs.World, t ecs.Tick) {
	g.econ.tradeQ.Each(func(id ecs.ID, tr *Trades, p *Position) {
		if len(tr.List) > 0 {
			g.driveTrades(id, tr, p.Pos)
		}
		if pu, ok := g.econ.purse.Get(id); ok && !pu.Known {
			g.readPurse(id) // a new master's first read
		}
	})
	g.driveOrphans()
	g.flushEconomy()
}

// accountFor is the account that owns id (a master or pet, local or
// handed over here), from the runtime's owner store.
func (g *Game) accountFor(id ecs.ID) (account.ID, bool) {
	o, ok := g.c.owner.Get(id)
	if !ok || o.Account == account.None {
		return account.None, false
	}
	return o.Account, true
}

// submit queues j for the workers. A trade's step is never dropped (the
// trade keeps it pending and submits it again); a loot, a purchase or a
// read past the backlog is.
func (g *Game) submit(j *econJob) bool {
	e := &g.econ
	if len(e.backlog) >= g.cfg.Economy.Backlog && j.kind != jobTrade {
		if j.kind != jobRead {
			e.stats.Dropped++
			g.r.Logger().Warn("game: economy backlog full; movement dropped", "key", j.mv.Key)
		}
		return false
	}
	if j.kind != jobRead {
		e.stats.Submitted++
	}
	e.backlog = append(e.backlog, j)
	return true
}

// flushEconomy hands the backlog to the workers, as far as they take it.
func (g *Game) flushEconomy() {
	e := &g.econ
	n := 0
	for n < len(e.backlog) && e.pool.offer(e.backlog[n]) {
		e.backlog[n] = nil
		n++
	}
	if n > 0 {
		e.backlog = append(e.backlog[:0], e.backlog[n:]...)
	}
}

// econDone applies a worker's answer on the world goroutine.
func (g *Game) econDone(res econResult) {
	e := &g.econ
	j := res.job
	if j.kind != jobRead {
		switch res.status {
		case answerAccepted:
			e.stats.Accepted++
		case answerRejected, answerExpired, answerDecided:
			e.stats.Rejected++
		case answerUnknown:
			e.stats.Unknown++
		case answerFailed:
			e.stats.Failed++
			g.r.Logger().Error("game: the economy refused a movement as malformed", "key", j.mv.Key, "scope", j.scope, "err", res.err)
		}
	}
	switch j.kind {
	case jobLoot:
		switch res.status {
		case answerAccepted:
			e.stats.Loot++
			g.purseChanged(j.master)
		case answerUnknown:
			g.r.Logger().Warn("game: loot given up on", "key", j.mv.Key, "err", res.err)
		}
	case jobBuy:
		switch res.status {
		case answerAccepted:
			e.stats.Bought++
			g.purseChanged(j.master)
		case answerRejected:
			e.stats.Refused++
		case answerUnknown:
			g.r.Logger().Warn("game: purchase given up on", "key", j.mv.Key, "err", res.err)
			g.purseChanged(j.master)
		}
	case jobTrade:
		if e.inflight[j.mv.Key] == j.attempt {
			delete(e.inflight, j.mv.Key)
		}
		g.tradeAnswer(j.master, j.trade, j.step, j.attempt, res.status)
	case jobRead:
		g.purseRead(j.master, res)
	}
}

// Intent kinds of the economy (zone.Intent.Kind), numbered apart from the
// game's others.
const (
	// Loot: the mob Source died by Target's blow; Amount coins are its.
	Loot uint16 = 0x100 + iota
	// TradeRequest: a partner's offer, accept or cancel, sent to the
	// master that decides the trade (Data: encodeRequest).
	TradeRequest
	// TradeNotice: the deciding master tells its partner the trade's
	// state (Data: the Trade).
	TradeNotice
	// TradeAnswer: the economy's answer to a trade's step, sent on to the
	// master that holds the trade now (Data: encodeAnswer).
	TradeAnswer
	// PurseStale: Target's holdings changed; its node reads them again.
	PurseStale
)

// onIntent is the game's intent handler: the economy's kinds, and around
// the others the mob's death that drops its loot.
func (g *Game) onIntent(w *ecs.World, in zone.Intent) {
	switch in.Kind {
	case Loot:
		g.applyLoot(in)
		return
	case TradeRequest:
		g.applyTradeRequest(in)
		return
	case TradeNotice:
		g.applyTradeNotice(in)
		return
	case TradeAnswer:
		g.applyTradeAnswer(in)
		return
	case PurseStale:
		g.readPurse(in.Target)
		return
	}
	// A mob is destroyed at the end of the tick it died in, so a second
	// blow in that tick finds it still there, already dead: only the
	// blow that took it below 1 drops its loot.
	living := false
	if in.Kind == Damage && g.econ.pool != nil && g.c.mob.Has(in.Target) {
		h, ok := g.c.health.Get(in.Target)
		living = ok && h.HP > 0
	}
	g.applyIntent(w, in)
	if living {
		if h, ok := g.c.health.Get(in.Target); !ok || h.HP <= 0 {
			g.dropLoot(in.Target, in.Source)
		}
	}
}

// dropLoot gives a dead mob's coins to its killer: the master that dealt
// the last blow, or whose pet did. The killer may live on another node,
// so the loot travels as an intent to it; the movement's key is the mob's
// id, so however often it is sent, it is counted once.
func (g *Game) dropLoot(mob, source ecs.ID) {
	if g.cfg.Economy.LootCoins == 0 || source == 0 {
		return
	}
	killer, ok := g.creditedMaster(source)
	if !ok {
		killer = source // a ghost: its own node resolves a pet to its master
	}
	g.econ.stats.Kills++
	g.r.Send(zone.Intent{Kind: Loot, Source: mob, Target: killer, Amount: g.cfg.Economy.LootCoins})
}

func (g *Game) applyLoot(in zone.Intent) {
	if g.econ.pool == nil {
		return
	}
	if p, ok := g.c.pet.Get(in.Target); ok {
		g.r.Send(zone.Intent{Kind: Loot, Source: in.Source, Target: p.Master, Amount: in.Amount})
		return
	}
	a, ok := g.accountFor(in.Target)
	if !ok || !g.c.master.Has(in.Target) || in.Amount <= 0 || in.Amount > maxAmount {
		return
	}
	g.submit(&econJob{kind: jobLoot, scope: PlayerScope(a), mv: lootMovement(in.Source, a, in.Amount), master: in.Target, acct: a})
}

// lootMovement moves a mob's coins from the platform to its killer.
func lootMovement(mob ecs.ID, a account.ID, coins int64) netting.Movement {
	return netting.Movement{
		Key:  "loot:" + strconv.FormatUint(uint64(mob), 10),
		Legs: []ledger.Leg{ledger.Debit(LootAccount, coins), ledger.Credit(CoinsAccount(a), coins)},
	}
}

// ---- the purse ----

// Purse is what a player can spend, as the economy last answered: its
// coins and its count of each good (Goods order), settled plus accepted
// movements not settled yet (a trade's offer is out of it until the trade
// ends). Owner only; a view, refreshed after every movement of the player
// this game sees; the ledger is the truth. Masters have one when the
// economy can be read (EconomyReader).
type Purse struct {
	Coins int64
	Goods [len(Goods)]int64
	// Known says the purse was read at least once (not sent).
	Known bool
}

// encodePurse is Purse's wire payload: signed varints of coins, then each
// good's count in Goods order.
func encodePurse(dst []byte, p *Purse) []byte {
	dst = binary.AppendVarint(dst, p.Coins)
	for _, n := range p.Goods {
		dst = binary.AppendVarint(dst, n)
	}
	return dst
}

// purseChanged reads a player's holdings again: here if its master is
// simulated here, else on its node.
func (g *Game) purseChanged(master ecs.ID) {
	if g.econ.pool == nil || g.econ.pool.reader == nil || master == 0 {
		return
	}
	if g.r.Simulated(master) {
		g.readPurse(master)
		return
	}
	g.r.Send(zone.Intent{Kind: PurseStale, Target: master})
}

// Reading states of a purse.
const (
	readInFlight uint8 = iota + 1
	readAgain
)

// readPurse reads the holdings of master's account, one read at a time
// per master: a change during a read reads once more after it.
func (g *Game) readPurse(master ecs.ID) {
	e := &g.econ
	if e.pool == nil || e.pool.reader == nil || !g.r.Simulated(master) {
		return
	}
	a, ok := g.accountFor(master)
	if !ok {
		return
	}
	if st, busy := e.reading[master]; busy {
		if st == readInFlight {
			e.reading[master] = readAgain
		}
		return
	}
	if g.submit(&econJob{kind: jobRead, accounts: HoldingsAccounts(a), master: master, acct: a}) {
		e.reading[master] = readInFlight
	}
}

func (g *Game) purseRead(master ecs.ID, res econResult) {
	again := g.econ.reading[master] == readAgain
	delete(g.econ.reading, master)
	if !g.r.Simulated(master) {
		// Handed on (or frozen in a handoff) while the read was out: the
		// purse it carried may be older than this answer, so its node
		// reads again (the intent follows the player; one that left the
		// world is not found, and nothing is read).
		g.r.Send(zone.Intent{Kind: PurseStale, Target: master})
		return
	}
	if again {
		g.readPurse(master)
	}
	if res.status != answerAccepted || len(res.holdings) != 1+len(Goods) {
		return
	}
	p, ok := g.econ.purse.Get(master)
	if !ok {
		return
	}
	next := Purse{Coins: res.holdings[0], Known: true}
	copy(next.Goods[:], res.holdings[1:])
	if *p != next {
		*p = next
		g.econ.purse.MarkDirty(master)
	}
}

// PurseOf returns the purse of a master simulated here, as last read.
func (g *Game) PurseOf(master ecs.ID) (Purse, bool) {
	if g.econ.purse == nil {
		return Purse{}, false
	}
	p, ok := g.econ.purse.Get(master)
	if !ok {
		return Purse{}, false
	}
	return *p, true
}

// joinEconomy gives a new master its economy components (createPlayer);
// the economy's system reads its purse.
func (g *Game) joinEconomy(master ecs.ID) error {
	if g.econ.pool == nil {
		return nil
	}
	err := g.econ.trades.Add(master, Trades{})
	if g.econ.pool.reader != nil {
		err = errors.Join(err, g.econ.purse.Add(master, Purse{}))
	}
	return err
}
