package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/proto/clientpb"
	"github.com/shardwise/shardwise/torus"
)

// Defaults of BotsConfig.
const (
	DefaultBotReach       = 200.0
	DefaultRelogChance    = 0.2
	DefaultRelogPause     = time.Second
	DefaultFightRadius    = 20.0
	DefaultLegTimeout     = 5 * time.Minute
	DefaultPingEvery      = 5 * time.Second
	DefaultBotLoginWait   = 15 * time.Second
	DefaultLoginRetries   = 5
	DefaultLoginRetryWait = time.Second
	DefaultShopWait       = 10 * time.Second
	DefaultTradeWait      = time.Minute
)

// BotsConfig configures a crowd of bots (StartBots, RunBots). Zero fields
// take the defaults documented on them.
type BotsConfig struct {
	// Gateways are the gateways' WebSocket URLs (ws://host:port/ws), taken
	// round robin: bot i's k-th login goes to Gateways[(i+k) % len], so a
	// bot that logs out and in again comes back on the next gateway.
	// Required.
	Gateways []string
	// Token returns a new login token for an account, once per login
	// (tokens are single use): the caller brings the issuer. Required.
	Token func(account.ID) (string, error)
	// Count is how many bots play. Default 1.
	Count int
	// FirstAccount is bot 0's account; bot i plays FirstAccount+i. Default
	// 1. Parties need nothing from a bot: the reference game groups
	// consecutive accounts (game.Config.PartySize of them, among accounts
	// 1 to game.Config.Players), so bots of neighbouring accounts are in a
	// party and see each other's health.
	FirstAccount account.ID
	// Seed makes the schedules: bot i's is a pure function of Seed and its
	// account (BotPlan).
	Seed uint64
	// Legs is how many waypoints each bot walks to before it logs out and
	// stops. Default 0: until the context ends.
	Legs int
	// Centre and Reach place the waypoints: each lies between Reach/2 and
	// Reach from Centre along each axis, in another quadrant around Centre
	// than the waypoint before, so every leg crosses at least one of the
	// two lines through Centre. The reference game's players start in a
	// square centred on (0, 0), which is a corner of four regions whatever
	// the region edge, so every leg crosses a region border. Defaults (0,
	// 0) and DefaultBotReach metres.
	Centre torus.Pos
	Reach  float64
	// RelogChance is the chance that after a leg (not the last) a bot logs
	// out and back in, on the next gateway. Default DefaultRelogChance;
	// negative: never.
	RelogChance float64
	// RelogPause is how long a bot stays logged out: the logout's save
	// must reach the world store before the next login loads the player.
	// Default DefaultRelogPause.
	RelogPause time.Duration
	// FightRadius: a bot attacks the nearest mob it sees this close to its
	// master (the game's mobs come at a player they notice, so the master
	// hits it when it is in reach). Default DefaultFightRadius metres.
	FightRadius float64
	// LegTimeout bounds one leg; a bot that has not arrived by then walks
	// on to its next waypoint. Default DefaultLegTimeout.
	LegTimeout time.Duration
	// PingEvery: a bot that sent nothing this long pings, so that the
	// gateway's idle timeout never closes a bot on a long walk. Default
	// DefaultPingEvery.
	PingEvery time.Duration
	// LoginWait bounds one login: the dial, Welcome and the master's
	// first position. Default DefaultBotLoginWait.
	LoginWait time.Duration
	// LoginRetries is how many failed logins in a row a bot takes before
	// it gives up (its error is in Wait's), each RetryWait after the last
	// and on the next gateway. Defaults DefaultLoginRetries and
	// DefaultLoginRetryWait.
	LoginRetries int
	RetryWait    time.Duration
	// ShopChance is the chance that after a leg a bot goes shopping: it
	// walks to the nearest den keeper it sees (none in sight: the first
	// it comes across in its next leg) and buys (game.InputBuy) one to
	// three of a good its purse affords, chosen at random. The game must
	// have an economy that clients are sent purses of. Default 0: never.
	ShopChance float64
	// ShopWait bounds how long a bot waits for its purse to show a
	// purchase; one it does not show by then counts as refused. Default
	// DefaultShopWait.
	ShopWait time.Duration
	// TradeChance is the chance that after a leg a pair of bots trades:
	// bots 2k and 2k+1 (a last bot of an odd count has no partner) draw
	// the same decision and the same meeting point from their pair's own
	// stream, each walks to its side of the point, on one of the two
	// lines through Centre (region borders, see Centre: the partners
	// stand 2 m either side of it, on two regions, on two nodes if the
	// regions are), and once each sees the other there they offer
	// (game.InputTradeOffer) and accept (game.InputTradeAccept): 2k gives
	// one to five coins (the plan's BotStep.Coins), 2k+1 one or two of the
	// good it holds most of. A bot whose purse lacks its side does not
	// go. Default 0: never.
	TradeChance float64
	// TradeFirst puts a first leg's trade (if drawn) before its walk
	// rather than after it: the pair meets as soon as it is logged in,
	// from where its players start, so that a short run (the demo) sees
	// trades. The walks and chances drawn are the same; so is the first
	// meeting point unless the pair can meet sooner (BotStep.Near): once
	// both are logged in, each tells the other where it stands; when a
	// line through Centre runs between them they meet on it, each on its
	// own side, else side by side between them: neither crosses a line
	// and comes back past the handoff margin (a walk of 100 m and more).
	TradeFirst bool
	// TradeWait bounds how long a bot at a meeting point waits for its
	// partner to show, and then for the trade to commit, before it
	// cancels (game.InputTradeCancel) and walks on. Default
	// DefaultTradeWait.
	TradeWait time.Duration
}

func (c BotsConfig) withDefaults() BotsConfig {
	if c.Count == 0 {
		c.Count = 1
	}
	if c.FirstAccount == account.None {
		c.FirstAccount = 1
	}
	if c.Reach == 0 {
		c.Reach = DefaultBotReach
	}
	if c.RelogChance == 0 {
		c.RelogChance = DefaultRelogChance
	}
	if c.RelogPause == 0 {
		c.RelogPause = DefaultRelogPause
	}
	if c.FightRadius == 0 {
		c.FightRadius = DefaultFightRadius
	}
	if c.LegTimeout == 0 {
		c.LegTimeout = DefaultLegTimeout
	}
	if c.PingEvery == 0 {
		c.PingEvery = DefaultPingEvery
	}
	if c.LoginWait == 0 {
		c.LoginWait = DefaultBotLoginWait
	}
	if c.LoginRetries == 0 {
		c.LoginRetries = DefaultLoginRetries
	}
	if c.RetryWait == 0 {
		c.RetryWait = DefaultLoginRetryWait
	}
	if c.ShopWait == 0 {
		c.ShopWait = DefaultShopWait
	}
	if c.TradeWait == 0 {
		c.TradeWait = DefaultTradeWait
	}
	return c
}

// Validate reports the first field that cannot work, after defaults, by
// its Go name (BotsConfig.Count).
func (c BotsConfig) Validate() error {
	c = c.withDefaults()
	if len(c.Gateways) == 0 {
		return errcode.Config("BotsConfig.Gateways", c.Gateways, "at least one gateway URL is required")
	}
	for _, u := range c.Gateways {
		if !strings.HasPrefix(u, "ws://") && !strings.HasPrefix(u, "wss://") {
			return errcode.Config("BotsConfig.Gateways", u, `must be a WebSocket URL ("ws://host:port/ws" or "wss://…")`)
		}
	}
	last := uint64(c.FirstAccount) + uint64(max(c.Count, 1)) - 1
	switch {
	case c.Token == nil:
		return errcode.Config("BotsConfig.Token", nil, "is required: the source of login tokens")
	case c.Count < 1:
		return errcode.Config("BotsConfig.Count", c.Count, "must be at least 1")
	case last < uint64(c.FirstAccount):
		return errcode.Config("BotsConfig.Count", c.Count, fmt.Sprintf("runs past the last account from %d", c.FirstAccount))
	case c.Legs < 0:
		return errcode.Config("BotsConfig.Legs", c.Legs, "must not be negative (0: until the context ends)")
	case !(c.Reach > 0) || math.IsInf(c.Reach, 0):
		return errcode.Config("BotsConfig.Reach", c.Reach, "must be a positive number of metres")
	case !c.Centre.Finite():
		return errcode.Config("BotsConfig.Centre", c.Centre, "must be finite")
	case c.RelogChance > 1 || math.IsNaN(c.RelogChance):
		return errcode.Config("BotsConfig.RelogChance", c.RelogChance, "must be at most 1")
	case c.RelogPause < 0:
		return errcode.Config("BotsConfig.RelogPause", c.RelogPause, "must not be negative")
	case !(c.FightRadius >= 0):
		return errcode.Config("BotsConfig.FightRadius", c.FightRadius, "must not be negative")
	case c.LegTimeout <= 0:
		return errcode.Config("BotsConfig.LegTimeout", c.LegTimeout, "must be positive")
	case c.PingEvery <= 0:
		return errcode.Config("BotsConfig.PingEvery", c.PingEvery, "must be positive")
	case c.LoginWait <= 0:
		return errcode.Config("BotsConfig.LoginWait", c.LoginWait, "must be positive")
	case c.LoginRetries < 1:
		return errcode.Config("BotsConfig.LoginRetries", c.LoginRetries, "must be at least 1")
	case c.RetryWait < 0:
		return errcode.Config("BotsConfig.RetryWait", c.RetryWait, "must not be negative")
	case !(c.ShopChance >= 0 && c.ShopChance <= 1):
		return errcode.Config("BotsConfig.ShopChance", c.ShopChance, "must be within [0, 1]")
	case c.ShopWait <= 0:
		return errcode.Config("BotsConfig.ShopWait", c.ShopWait, "must be positive")
	case !(c.TradeChance >= 0 && c.TradeChance <= 1):
		return errcode.Config("BotsConfig.TradeChance", c.TradeChance, "must be within [0, 1]")
	case c.TradeWait <= 0:
		return errcode.Config("BotsConfig.TradeWait", c.TradeWait, "must be positive")
	}
	return nil
}

// BotStepKind is what a step of a bot's schedule does.
type BotStepKind uint8

// Kinds of step.
const (
	// StepWalk walks the master to To (an offset from BotsConfig.Centre).
	StepWalk BotStepKind = iota + 1
	// StepRelog logs out, waits RelogPause, and logs in on the next
	// gateway; the player must come back where it left.
	StepRelog
	// StepShop buys at the nearest den keeper in sight, or at the first
	// one the next leg comes across (BotsConfig.ShopChance). What and how
	// many depend on the purse: drawn when the bot gets there.
	StepShop
	// StepTrade walks to To, this bot's side of a meeting point, and
	// trades with bot Partner standing at PartnerAt
	// (BotsConfig.TradeChance).
	StepTrade
)

// BotStep is one step of a bot's schedule.
type BotStep struct {
	Kind BotStepKind
	// To is a walk's waypoint, or where a trade's bot stands, as an
	// offset from BotsConfig.Centre.
	To torus.Pos
	// A trade's partner (a bot index), where it stands (an offset from
	// Centre), and the coins the pair's lower index gives.
	Partner   int
	PartnerAt torus.Pos
	Coins     int64
	// Near marks a first leg's trade under BotsConfig.TradeFirst: the
	// pair may meet elsewhere than To and PartnerAt (see TradeFirst).
	Near bool
}

// BotPlan returns the first legs legs of bot's schedule: each leg's walk,
// then, as drawn, a shopping trip, a trade and (between legs) a relog. It
// is a pure function of cfg.Seed, the bot's account, its pair's first
// account, and cfg's Count, Reach and chances, so a run can be replayed;
// the two bots of a pair have their trades at the same legs, at the same
// meeting points. Walks and relogs, shops, and trades are drawn from
// streams of their own, so a chance changes no other step. The plan of n
// legs is a prefix of the plan of n+1.
func BotPlan(cfg BotsConfig, bot, legs int) []BotStep {
	s := newSchedule(cfg.withDefaults(), bot)
	var steps []BotStep
	for leg := range legs {
		steps = append(steps, s.next(leg == legs-1)...)
	}
	return steps
}

// planner draws a bot's schedule, one leg at a time.
type planner struct {
	r      *rand.Rand
	reach  float64
	chance float64
	sx, sy float64
	legs   int
}

func newPlanner(cfg BotsConfig, bot int) *planner {
	acct := uint64(cfg.FirstAccount) + uint64(bot)
	p := &planner{r: rand.New(rand.NewPCG(cfg.Seed, acct^0x5eed_b075)), reach: cfg.Reach, chance: cfg.RelogChance, sx: 1, sy: 1}
	if p.r.IntN(2) == 0 {
		p.sx = -1
	}
	if p.r.IntN(2) == 0 {
		p.sy = -1
	}
	return p
}

// next returns the next leg's walk and whether a relog follows it.
func (p *planner) next() (BotStep, bool) {
	if p.legs > 0 {
		// Another quadrant: flip one sign or both, so that the leg crosses
		// one or both lines through the centre.
		switch p.r.IntN(3) {
		case 0:
			p.sx = -p.sx
		case 1:
			p.sy = -p.sy
		default:
			p.sx, p.sy = -p.sx, -p.sy
		}
	}
	p.legs++
	h := p.reach
	to := torus.Pos{X: p.sx * h * (0.5 + p.r.Float64()/2), Y: p.sy * h * (0.5 + p.r.Float64()/2)}
	relog := p.r.Float64() < p.chance // drawn every leg, so every prefix is the same
	return BotStep{Kind: StepWalk, To: to}, relog
}

// tradeGap is how far either side of the line through Centre a trade's
// partners stand: on two regions, well within the game's trade range.
const tradeGap = 2.0

// schedule draws a bot's whole schedule, a leg at a time: its walks and
// relogs (planner), its shopping trips (a stream of the bot's own) and
// its pair's trades (a stream its partner draws alike). Every stream is
// drawn the same every leg whatever the chances, so a plan's every prefix
// is the same and no chance changes another's steps.
type schedule struct {
	walks *planner
	shops *rand.Rand
	pair  *rand.Rand // nil: no partner
	cfg   BotsConfig
	bot   int
	// trades counts the pair's trades so far: meetings alternate between
	// the two lines through Centre.
	trades int
}

func newSchedule(cfg BotsConfig, bot int) *schedule {
	acct := uint64(cfg.FirstAccount) + uint64(bot)
	s := &schedule{walks: newPlanner(cfg, bot), cfg: cfg, bot: bot,
		shops: rand.New(rand.NewPCG(cfg.Seed, acct^0x5409_b075))}
	if bot^1 < cfg.Count {
		first := uint64(cfg.FirstAccount) + uint64(bot&^1)
		s.pair = rand.New(rand.NewPCG(cfg.Seed, first^0x7ade_b075))
	}
	return s
}

// next returns the next leg's steps: its walk, then as drawn a shopping
// trip, a trade, and unless last a relog.
func (s *schedule) next(last bool) []BotStep {
	walk, relog := s.walks.next()
	first := s.walks.legs == 1
	steps := []BotStep{walk}
	if s.shops.Float64() < s.cfg.ShopChance {
		steps = append(steps, BotStep{Kind: StepShop})
	}
	if s.pair != nil {
		trade := s.pair.Float64() < s.cfg.TradeChance
		along := s.cfg.Reach * (0.5 + s.pair.Float64()/2)
		if s.pair.IntN(2) == 0 {
			along = -along
		}
		coins := 1 + s.pair.Int64N(5)
		if trade {
			// Pairs alternate the line they meet on, and so do a pair's
			// meetings: pair k's j-th is on the line y = Centre.Y if k+j
			// is even, else on x = Centre.X.
			lo, hi := torus.Pos{X: along, Y: -tradeGap}, torus.Pos{X: along, Y: tradeGap}
			if (s.bot/2+s.trades)%2 == 1 {
				lo, hi = torus.Pos{X: -tradeGap, Y: along}, torus.Pos{X: tradeGap, Y: along}
			}
			s.trades++
			if s.bot%2 == 1 {
				lo, hi = hi, lo
			}
			t := BotStep{Kind: StepTrade, To: lo, Partner: s.bot ^ 1, PartnerAt: hi, Coins: coins}
			if first && s.cfg.TradeFirst {
				t.Near = true
				steps = append([]BotStep{t}, steps...)
			} else {
				steps = append(steps, t)
			}
		}
	}
	if relog && !last {
		steps = append(steps, BotStep{Kind: StepRelog})
	}
	return steps
}

// BotStats count what bots did and saw. Errors and Closes are keyed by
// the protocol's codes (docs/protocol.md).
type BotStats struct {
	Bots int
	// Logins counts logins that reached Welcome and the master; Relogs the
	// planned log out and in again; Reconnects the logins after a socket
	// the bot did not close (displaced, idle, the node stopped, …);
	// LoginFailures the logins that failed.
	Logins, Relogs, Reconnects, LoginFailures int
	// SessionResumes counts reconnects that resumed the session with the
	// resume credential (no login token; counted in Logins and Reconnects
	// too); ResumesRefused those refused (4008), after which the bot
	// logged in with a token.
	SessionResumes, ResumesRefused int
	// Resumed counts relogs after which the master stood where it had
	// left (within 2 m); ResumeMisses those after which it did not.
	Resumed, ResumeMisses int
	// Inputs counts inputs sent (moves, attacks, stops); Pings the pings.
	Inputs, Pings int
	// Legs counts waypoints reached; LegTimeouts legs given up on.
	Legs, LegTimeouts int
	// Attacks counts mobs attacked; Heals the times a master's health rose
	// (its pet heals it).
	Attacks, Heals int
	// Errors counts the Error messages received, by code; Closes the
	// sockets the server closed under a bot, by close reason (the code)
	// or "status <n>" when it gave none.
	Errors, Closes map[string]int
	// What the clients saw (ClientStats), summed over every connection.
	Batches, Blinks, EdgeReturns, OutOfOrder, Bytes, Leaks int
	// BlinkLog is the first blinks seen (at most BlinkLogLen), for
	// diagnosis and for telling whose entities blinked.
	BlinkLog []Blink
	// Purchases counts the purchases a bot's purse showed (the good's
	// count rose); PurchasesRefused those it did not show within
	// ShopWait (refused for want of coins, or no keeper in reach);
	// ShopMisses the shopping trips that bought nothing: no keeper in
	// sight within the next leg, none reached, or nothing the purse
	// afforded. PurchasesUnseen counts those whose outcome the bot never
	// saw: the play ended, or its socket closed, while it waited (the
	// economy may well have accepted them; only the game's own counters,
	// game.EconomyStats, know).
	Purchases, PurchasesRefused, ShopMisses, PurchasesUnseen int
	// TradesCommitted counts the trades a bot saw commit in its purse (it
	// got its partner's side: each side counts its own); TradesCancelled
	// those it offered that did not commit (the bot cancelled after
	// TradeWait, or the game did: the partner left, an offer was
	// refused); TradeTimeouts the meetings its partner did not show at
	// within TradeWait (or that the bot never reached); TradeSkips the
	// meetings it did not go to, its purse lacking its side.
	TradesCommitted, TradesCancelled, TradeTimeouts, TradeSkips int
	// TradeLog is the first committed trades (at most 16) as each side
	// saw them, for checking where they happened.
	TradeLog []TradeMeeting
	// Purses counts the bots that were sent a purse; Coins and Goods (in
	// game.Goods order) sum them, each as last seen (a bot that logged
	// out: as it left).
	Purses int
	Coins  int64
	Goods  [len(game.Goods)]int64
	// Done counts bots that finished (their legs, the context, or given up).
	Done int
}

// TradeMeeting is a committed trade as one side saw it: the two bots (by
// index) and where each stood.
type TradeMeeting struct {
	Bot, Partner  int
	At, PartnerAt torus.Pos
}

func (s *BotStats) add(o BotStats) {
	s.Bots += o.Bots
	s.Logins += o.Logins
	s.Relogs += o.Relogs
	s.Reconnects += o.Reconnects
	s.SessionResumes += o.SessionResumes
	s.ResumesRefused += o.ResumesRefused
	s.LoginFailures += o.LoginFailures
	s.Resumed += o.Resumed
	s.ResumeMisses += o.ResumeMisses
	s.Inputs += o.Inputs
	s.Pings += o.Pings
	s.Legs += o.Legs
	s.LegTimeouts += o.LegTimeouts
	s.Attacks += o.Attacks
	s.Heals += o.Heals
	s.Batches += o.Batches
	s.Blinks += o.Blinks
	s.Leaks += o.Leaks
	s.EdgeReturns += o.EdgeReturns
	s.BlinkLog = appendBlinks(s.BlinkLog, o.BlinkLog)
	s.OutOfOrder += o.OutOfOrder
	s.Bytes += o.Bytes
	s.Purchases += o.Purchases
	s.PurchasesRefused += o.PurchasesRefused
	s.PurchasesUnseen += o.PurchasesUnseen
	s.ShopMisses += o.ShopMisses
	s.TradesCommitted += o.TradesCommitted
	s.TradesCancelled += o.TradesCancelled
	s.TradeTimeouts += o.TradeTimeouts
	s.TradeSkips += o.TradeSkips
	s.TradeLog = append(s.TradeLog, o.TradeLog[:min(len(o.TradeLog), max(16-len(s.TradeLog), 0))]...)
	s.Purses += o.Purses
	s.Coins += o.Coins
	for i := range s.Goods {
		s.Goods[i] += o.Goods[i]
	}
	s.Done += o.Done
	s.Errors = addCounts(s.Errors, o.Errors)
	s.Closes = addCounts(s.Closes, o.Closes)
}

func addCounts(dst, src map[string]int) map[string]int {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]int, len(src))
	}
	for k, v := range src {
		dst[k] += v
	}
	return dst
}

// ErrorCount is the total of Errors.
func (s BotStats) ErrorCount() int {
	n := 0
	for _, v := range s.Errors {
		n += v
	}
	return n
}

// Bots is a running crowd of bots.
type Bots struct {
	cfg    BotsConfig
	cancel context.CancelFunc
	wg     sync.WaitGroup
	bots   []*bot
}

// StartBots validates cfg and starts cfg.Count bots, each on its own
// goroutine, logging in one after another as they start. They play until
// each has walked its Legs or ctx ends, then log out; Wait returns then.
func StartBots(ctx context.Context, cfg BotsConfig) (*Bots, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(ctx)
	b := &Bots{cfg: cfg, cancel: cancel}
	meets := make([]*pairMeet, (cfg.Count+1)/2)
	for i := range meets {
		meets[i] = newPairMeet()
	}
	for i := range cfg.Count {
		bt := &bot{cfg: cfg, index: i, acct: cfg.FirstAccount + account.ID(i), stats: BotStats{Bots: 1}, meet: meets[i/2]}
		bt.choices = rand.New(rand.NewPCG(cfg.Seed, uint64(bt.acct)^0xc401_ce5b))
		b.bots = append(b.bots, bt)
		b.wg.Go(func() { bt.run(ctx) })
	}
	return b, nil
}

// RunBots is StartBots and Wait.
func RunBots(ctx context.Context, cfg BotsConfig) (BotStats, error) {
	b, err := StartBots(ctx, cfg)
	if err != nil {
		return BotStats{}, err
	}
	return b.Wait()
}

// Stats sums every bot's counters so far, the connections still open
// included. Safe to call at any time.
func (b *Bots) Stats() BotStats {
	var s BotStats
	for _, bt := range b.bots {
		s.add(bt.snapshot())
	}
	return s
}

// Wait waits for every bot and returns their counters and the errors of
// the bots that gave up.
func (b *Bots) Wait() (BotStats, error) {
	b.wg.Wait()
	var errs []error
	for _, bt := range b.bots {
		if bt.err != nil {
			errs = append(errs, bt.err)
		}
	}
	return b.Stats(), errors.Join(errs...)
}

// Stop ends every bot (each logs out) and waits for them.
func (b *Bots) Stop() (BotStats, error) {
	b.cancel()
	return b.Wait()
}

// bot is one bot. Everything but mu's fields is its goroutine's.
type bot struct {
	cfg   BotsConfig
	index int
	acct  account.ID
	err   error // set before run returns

	c        *Client
	logins   int // logins attempted: the next gateway
	geo      torus.World
	master   uint64
	lastSent time.Time
	fighting uint64
	hp       int32
	standing bool // the last walk arrived: the master stands at its waypoint
	// choices draws what depends on the world (what to buy, what to
	// offer), seeded by the bot's account; shopPending says a shopping
	// trip found no keeper in sight and looks for one in the next leg.
	choices     *rand.Rand
	shopPending bool
	// meet is shared with the bot's partner: where each stood when its
	// first trade began (BotStep.Near).
	meet *pairMeet

	mu    sync.Mutex
	stats BotStats // closed connections included, the open one not
	// purse is the purse of the last connection closed, if it had one.
	purse    game.Purse
	hasPurse bool
}

func (b *bot) count(fn func(*BotStats)) {
	b.mu.Lock()
	fn(&b.stats)
	b.mu.Unlock()
}

// snapshot is the bot's counters with its open connection's.
func (b *bot) snapshot() BotStats {
	b.mu.Lock()
	s := b.stats
	s.Errors, s.Closes = maps.Clone(s.Errors), maps.Clone(s.Closes)
	s.BlinkLog, s.TradeLog = slices.Clone(s.BlinkLog), slices.Clone(s.TradeLog)
	c := b.c
	pu, known := b.purse, b.hasPurse
	b.mu.Unlock()
	if c != nil {
		c.Look(func(v *View) {
			addClient(&s, v)
			if p, ok := v.Purse(); ok {
				pu, known = p, true
			}
		})
	}
	if known {
		s.Purses, s.Coins, s.Goods = 1, pu.Coins, pu.Goods
	}
	return s
}

func addClient(s *BotStats, v *View) {
	cs := v.Stats()
	s.Batches += cs.Batches
	s.Blinks += cs.Blinks
	s.Leaks += cs.Leaks
	s.EdgeReturns += cs.EdgeReturns
	s.BlinkLog = appendBlinks(s.BlinkLog, cs.BlinkLog)
	s.OutOfOrder += cs.OutOfOrder
	s.Bytes += cs.Bytes
	for _, e := range v.Errors() {
		s.Errors = addCounts(s.Errors, map[string]int{e.Code: 1})
	}
}

func appendBlinks(dst, src []Blink) []Blink {
	return append(dst, src[:min(len(src), max(BlinkLogLen-len(dst), 0))]...)
}

// BlinkLogLen bounds a client's and the bots' BlinkLog: enough to tell
// whose entities blinked in a failover (every client that had a dead
// node's entities in view sees each vanish and come back), bounded so a
// broken run's stats stay small.
const BlinkLogLen = 4096

// errGone says the socket closed under the bot.
var errGone = errors.New("sim: the socket closed")

func (b *bot) run(ctx context.Context) {
	defer b.count(func(s *BotStats) { s.Done++ })
	defer b.hangUp(true)
	if err := b.login(ctx, false); err != nil {
		b.err = err
		return
	}
	s := newSchedule(b.cfg, b.index)
	for leg := 0; b.cfg.Legs == 0 || leg < b.cfg.Legs; leg++ {
		last := b.cfg.Legs != 0 && leg == b.cfg.Legs-1
		var err error
		for _, st := range s.next(last) {
			switch st.Kind {
			case StepWalk:
				err = b.walk(ctx, st.To)
			case StepShop:
				err = b.shop(ctx, last)
			case StepTrade:
				err = b.trade(ctx, st)
			case StepRelog:
				err = b.relog(ctx)
			}
			if err != nil {
				break
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			b.err = err
			return
		}
	}
}

// login connects to the next gateway and logs in, retrying on the ones
// after it.
func (b *bot) login(ctx context.Context, reconnect bool) error {
	var last error
	for try := 0; try < b.cfg.LoginRetries; try++ {
		if try > 0 {
			if !pause(ctx, b.cfg.RetryWait) {
				return ctx.Err()
			}
		}
		url := b.cfg.Gateways[(b.index+b.logins)%len(b.cfg.Gateways)]
		b.logins++
		err := b.loginOnce(ctx, url)
		if err == nil {
			b.count(func(s *BotStats) {
				s.Logins++
				if reconnect {
					s.Reconnects++
				}
			})
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.count(func(s *BotStats) { s.LoginFailures++ })
		last = fmt.Errorf("sim: bot %d (account %d) on %s: %w", b.index, b.acct, url, err)
	}
	return last
}

func (b *bot) loginOnce(ctx context.Context, url string) error {
	tok, err := b.cfg.Token(b.acct)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	return b.connect(ctx, url, func(lctx context.Context, c *Client) (*clientpb.Welcome, error) { return c.Login(lctx, tok) })
}

// connect dials url, starts the session with start (a login or a
// resume), and waits for the master's first position.
func (b *bot) connect(ctx context.Context, url string, start func(context.Context, *Client) (*clientpb.Welcome, error)) error {
	lctx, cancel := context.WithTimeout(ctx, b.cfg.LoginWait)
	defer cancel()
	c, err := Dial(lctx, url)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.c = c
	b.mu.Unlock()
	w, err := start(lctx, c)
	if err == nil {
		b.geo, err = geometry(w.GetWorld())
	}
	if err == nil {
		err = c.Wait(lctx, func(v *View) bool {
			m, _ := v.You()
			_, ok := v.Position(m)
			b.master = m
			return ok
		})
	}
	if err != nil {
		b.hangUp(false)
		return err
	}
	b.lastSent, b.fighting, b.hp = time.Now(), 0, 0
	return nil
}

func geometry(w interface {
	GetSizeX() float64
	GetSizeY() float64
	GetChunkEdge() float64
}) (torus.World, error) {
	return torus.New(torus.Config{Width: int(w.GetSizeX()), Height: int(w.GetSizeY()), ChunkEdge: int(w.GetChunkEdge())})
}

// hangUp ends the connection: with logout, politely (the server saves the
// player and closes the socket); otherwise it just cuts it. The
// connection's counters join the bot's, and a close the bot did not ask
// for is counted by its reason.
func (b *bot) hangUp(logout bool) {
	c := b.c
	if c == nil {
		return
	}
	if logout {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if c.Logout(ctx) == nil {
			select {
			case <-c.Done():
			case <-ctx.Done():
			}
		}
		cancel()
	}
	select {
	case <-c.Done():
		if code, reason, _ := c.Closed(); !logout && code != websocket.StatusNormalClosure {
			key := reason
			if key == "" {
				key = fmt.Sprintf("status %d", code)
			}
			b.count(func(s *BotStats) { s.Closes = addCounts(s.Closes, map[string]int{key: 1}) })
		}
	default:
	}
	_ = c.Close()
	var s BotStats
	var pu game.Purse
	var known bool
	c.Look(func(v *View) {
		addClient(&s, v)
		pu, known = v.Purse()
	})
	b.mu.Lock()
	b.c = nil
	b.stats.add(s)
	if known {
		b.purse, b.hasPurse = pu, true
	}
	b.mu.Unlock()
}

// reconnect replaces a connection that closed under the bot: it resumes
// the session with the credential the server handed it, on the next
// gateway (and, should that one not answer, the ones after it: its own
// may be dead), and logs in with a new token only if it has no
// credential or it is refused.
func (b *bot) reconnect(ctx context.Context) error {
	var cred string
	if b.c != nil {
		cred = b.c.Credential()
	}
	b.hangUp(false)
	if cred != "" {
		resumed, err := b.resume(ctx, cred)
		if resumed || ctx.Err() != nil {
			return err
		}
	}
	return b.login(ctx, true)
}

// resume tries the credential on the next gateways, as login does; false
// if it was refused or no gateway took it (then a login follows).
func (b *bot) resume(ctx context.Context, cred string) (bool, error) {
	for try := 0; try < b.cfg.LoginRetries; try++ {
		if try > 0 && !pause(ctx, b.cfg.RetryWait) {
			return false, ctx.Err()
		}
		url := b.cfg.Gateways[(b.index+b.logins)%len(b.cfg.Gateways)]
		b.logins++
		err := b.connect(ctx, url, func(lctx context.Context, c *Client) (*clientpb.Welcome, error) { return c.Resume(lctx, cred) })
		if err == nil {
			b.count(func(s *BotStats) { s.Logins++; s.Reconnects++; s.SessionResumes++ })
			return true, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if errors.Is(err, ErrResumeRefused) {
			b.count(func(s *BotStats) { s.ResumesRefused++ })
			return false, nil
		}
		b.count(func(s *BotStats) { s.LoginFailures++ })
	}
	return false, nil
}

func (b *bot) input(ctx context.Context, send func(context.Context) (uint32, error)) error {
	if _, err := send(ctx); err != nil {
		return errGone
	}
	b.lastSent = time.Now()
	b.count(func(s *BotStats) { s.Inputs++ })
	return nil
}

// walk walks the master to the waypoint at offset to from the centre (a
// leg), fighting the mobs that come near, pinging on long walks,
// reconnecting if the socket is lost; a shopping trip left pending by the
// leg before goes to the first keeper it comes across on the way.
func (b *bot) walk(ctx context.Context, to torus.Pos) error {
	dest := b.geo.Normalise(b.geo.Translate(b.cfg.Centre, to))
	deadline := time.Now().Add(b.cfg.LegTimeout)
	for {
		var den torus.Pos
		divert := func(v *View) bool {
			if !b.shopPending {
				return false
			}
			var ok bool
			den, ok = b.nearestDen(v)
			return ok
		}
		arrived, diverted, err := b.travel(ctx, dest, deadline, divert)
		if err != nil {
			return err
		}
		if diverted {
			b.shopPending = false
			if err := b.buyAt(ctx, den, deadline); err != nil {
				return err
			}
			continue
		}
		b.count(func(s *BotStats) {
			if arrived {
				s.Legs++
			} else {
				s.LegTimeouts++
			}
			if b.shopPending {
				s.ShopMisses++
			}
		})
		b.shopPending = false
		return nil
	}
}

// travel walks the master to dest until it arrives, deadline passes, or
// divert (if not nil) holds of what the client sees (diverted), fighting,
// pinging and reconnecting on the way.
func (b *bot) travel(ctx context.Context, dest torus.Pos, deadline time.Time, divert func(*View) bool) (arrived, diverted bool, err error) {
	b.standing = false
	for {
		m := b.master
		if err := b.input(ctx, func(ctx context.Context) (uint32, error) { return b.c.Move(ctx, m, dest.X, dest.Y) }); err != nil {
			if err := b.lost(ctx); err != nil {
				return false, false, err
			}
			continue
		}
		held, err := b.await(ctx, deadline, true, func(v *View) bool {
			p, ok := v.Position(b.master)
			arrived = ok && b.geo.Within(p, dest, 1.5)
			diverted = !arrived && divert != nil && divert(v)
			return arrived || diverted
		})
		switch {
		case errors.Is(err, errGone):
			if err := b.lost(ctx); err != nil {
				return false, false, err
			}
			arrived, diverted = false, false
		case err != nil:
			return false, false, err
		case !held:
			return false, false, nil
		default:
			b.standing = arrived
			return arrived, diverted, nil
		}
	}
}

// await waits until cond holds of what the client sees (true) or
// deadline passes (false), pinging when the bot sent nothing for
// PingEvery and, if fight, attacking the mobs that come near. It returns
// errGone if the socket closed (the caller reconnects) and ctx's error
// if ctx ended.
func (b *bot) await(ctx context.Context, deadline time.Time, fight bool, cond func(*View) bool) (bool, error) {
	for {
		var held bool
		var target uint64
		wait := b.lastSent.Add(b.cfg.PingEvery)
		if deadline.Before(wait) {
			wait = deadline
		}
		wctx, cancel := context.WithDeadline(ctx, wait)
		err := b.c.Wait(wctx, func(v *View) bool {
			b.noteHealth(v)
			held = cond(v)
			if !held && fight {
				if p, ok := v.Position(b.master); ok {
					target = b.pickMob(v, p)
				}
			}
			return held || target != 0
		})
		cancel()
		switch {
		case ctx.Err() != nil:
			return false, ctx.Err()
		case held:
			return true, nil
		case target != 0:
			m := b.master
			if err := b.input(ctx, func(ctx context.Context) (uint32, error) { return b.c.Attack(ctx, m, target) }); err != nil {
				return false, err
			}
			b.fighting = target
			b.count(func(s *BotStats) { s.Attacks++ })
		case errors.Is(err, context.DeadlineExceeded):
			if !time.Now().Before(deadline) {
				return false, nil
			}
			if err := b.c.Ping(ctx, uint64(time.Now().UnixNano())); err != nil {
				return false, errGone
			}
			b.lastSent = time.Now()
			b.count(func(s *BotStats) { s.Pings++ })
		case err != nil: // the socket closed
			return false, errGone
		}
	}
}

// lost handles a socket that closed under the bot: reconnect, unless ctx
// ended.
func (b *bot) lost(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return b.reconnect(ctx)
}

// pickMob returns a mob to attack: the nearest one within FightRadius of
// the master at p, unless the one being fought is still in sight.
func (b *bot) pickMob(v *View, p torus.Pos) uint64 {
	if b.fighting != 0 {
		if _, ok := v.Entity(b.fighting); ok {
			return 0
		}
		b.fighting = 0
	}
	best, bestD := uint64(0), b.cfg.FightRadius
	v.Each(func(e *Entity) {
		if vis := e.Components[game.WireVisual]; len(vis) != 1 || game.Kind(vis[0]) != game.KindMob {
			return
		}
		q, ok := v.Where(e.ID)
		if !ok {
			return
		}
		if d := b.geo.Distance(p, q); d <= bestD {
			best, bestD = e.ID, d
		}
	})
	return best
}

// noteHealth counts a rise in the master's health: its pet healed it.
func (b *bot) noteHealth(v *View) {
	e, ok := v.Entity(b.master)
	if !ok {
		return
	}
	hp, ok := health(e.Components[game.WireHealth])
	if !ok {
		return
	}
	if b.hp != 0 && hp > b.hp {
		b.count(func(s *BotStats) { s.Heals++ })
	}
	b.hp = hp
}

// health decodes the reference game's health payload: hp and max, two
// uvarints (game/components.go).
func health(b []byte) (int32, bool) {
	hp, n := binary.Uvarint(b)
	if n <= 0 || hp > math.MaxInt32 {
		return 0, false
	}
	if _, m := binary.Uvarint(b[n:]); m <= 0 || n+m != len(b) {
		return 0, false
	}
	return int32(hp), true
}

// relog stops, logs out, waits RelogPause and logs in on the next
// gateway, and checks that the master came back where it left.
func (b *bot) relog(ctx context.Context) error {
	// Where the master left is known exactly only if it stands still: a
	// walking one's position is sent every few steps.
	var left torus.Pos
	known := b.standing
	b.c.Look(func(v *View) {
		var ok bool
		left, ok = v.Position(b.master)
		known = known && ok
	})
	b.hangUp(true)
	if !pause(ctx, b.cfg.RelogPause) {
		return ctx.Err()
	}
	if err := b.login(ctx, false); err != nil {
		return err
	}
	var back torus.Pos
	b.c.Look(func(v *View) { back, _ = v.Position(b.master) })
	b.count(func(s *BotStats) {
		s.Relogs++
		switch {
		case !known:
		case b.geo.Within(back, left, 2):
			s.Resumed++
		default:
			s.ResumeMisses++
		}
	})
	return nil
}

// pause waits d or until ctx ends (false).
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
