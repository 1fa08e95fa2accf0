package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/game"
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
)

// BotStep is one step of a bot's schedule.
type BotStep struct {
	Kind BotStepKind
	// To is a walk's waypoint as an offset from BotsConfig.Centre.
	To torus.Pos
}

// BotPlan returns the first legs legs of bot's schedule, with the relogs
// between them: a pure function of cfg.Seed, the bot's account and cfg's
// Reach and RelogChance, so a run can be replayed. The plan of n legs is
// a prefix of the plan of n+1.
func BotPlan(cfg BotsConfig, bot, legs int) []BotStep {
	p := newPlanner(cfg.withDefaults(), bot)
	var steps []BotStep
	for leg := range legs {
		walk, relog := p.next()
		steps = append(steps, walk)
		if relog && leg < legs-1 {
			steps = append(steps, BotStep{Kind: StepRelog})
		}
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

// BotStats count what bots did and saw. Errors and Closes are keyed by
// the protocol's codes (docs/protocol.md).
type BotStats struct {
	Bots int
	// Logins counts logins that reached Welcome and the master; Relogs the
	// planned log out and in again; Reconnects the logins after a socket
	// the bot did not close (displaced, idle, the node stopped, …);
	// LoginFailures the logins that failed.
	Logins, Relogs, Reconnects, LoginFailures int
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
	Batches, Blinks, EdgeReturns, OutOfOrder, Bytes int
	// BlinkLog is the first blinks seen (at most 16), for diagnosis.
	BlinkLog []Blink
	// Done counts bots that finished (their legs, the context, or given up).
	Done int
}

func (s *BotStats) add(o BotStats) {
	s.Bots += o.Bots
	s.Logins += o.Logins
	s.Relogs += o.Relogs
	s.Reconnects += o.Reconnects
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
	s.EdgeReturns += o.EdgeReturns
	s.BlinkLog = appendBlinks(s.BlinkLog, o.BlinkLog)
	s.OutOfOrder += o.OutOfOrder
	s.Bytes += o.Bytes
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
	for i := range cfg.Count {
		bt := &bot{cfg: cfg, index: i, acct: cfg.FirstAccount + account.ID(i), stats: BotStats{Bots: 1}}
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

	mu    sync.Mutex
	stats BotStats // closed connections included, the open one not
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
	c := b.c
	b.mu.Unlock()
	if c != nil {
		c.Look(func(v *View) { addClient(&s, v) })
	}
	return s
}

func addClient(s *BotStats, v *View) {
	cs := v.Stats()
	s.Batches += cs.Batches
	s.Blinks += cs.Blinks
	s.EdgeReturns += cs.EdgeReturns
	s.BlinkLog = appendBlinks(s.BlinkLog, cs.BlinkLog)
	s.OutOfOrder += cs.OutOfOrder
	s.Bytes += cs.Bytes
	for _, e := range v.Errors() {
		s.Errors = addCounts(s.Errors, map[string]int{e.Code: 1})
	}
}

func appendBlinks(dst, src []Blink) []Blink {
	return append(dst, src[:min(len(src), max(16-len(dst), 0))]...)
}

// errGone says the socket closed under the bot.
var errGone = errors.New("sim: the socket closed")

func (b *bot) run(ctx context.Context) {
	defer b.count(func(s *BotStats) { s.Done++ })
	defer b.hangUp(true)
	if err := b.login(ctx, false); err != nil {
		b.err = err
		return
	}
	p := newPlanner(b.cfg, b.index)
	for leg := 0; b.cfg.Legs == 0 || leg < b.cfg.Legs; leg++ {
		walk, relog := p.next()
		err := b.walk(ctx, walk.To)
		if err == nil && relog && (b.cfg.Legs == 0 || leg < b.cfg.Legs-1) {
			err = b.relog(ctx)
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
	lctx, cancel := context.WithTimeout(ctx, b.cfg.LoginWait)
	defer cancel()
	c, err := Dial(lctx, url)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.c = c
	b.mu.Unlock()
	w, err := c.Login(lctx, tok)
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
	c.Look(func(v *View) { addClient(&s, v) })
	b.mu.Lock()
	b.c = nil
	b.stats.add(s)
	b.mu.Unlock()
}

// reconnect replaces a connection that closed under the bot.
func (b *bot) reconnect(ctx context.Context) error {
	b.hangUp(false)
	return b.login(ctx, true)
}

func (b *bot) input(ctx context.Context, send func(context.Context) (uint32, error)) error {
	if _, err := send(ctx); err != nil {
		return errGone
	}
	b.lastSent = time.Now()
	b.count(func(s *BotStats) { s.Inputs++ })
	return nil
}

// walk walks the master to the waypoint at offset to from the centre,
// fighting the mobs that come near, pinging on long walks, reconnecting
// if the socket is lost.
func (b *bot) walk(ctx context.Context, to torus.Pos) error {
	dest := b.geo.Normalise(b.geo.Translate(b.cfg.Centre, to))
	b.standing = false
	deadline := time.Now().Add(b.cfg.LegTimeout)
	moving := false
	for {
		if !moving {
			m := b.master
			if err := b.input(ctx, func(ctx context.Context) (uint32, error) { return b.c.Move(ctx, m, dest.X, dest.Y) }); err != nil {
				if err := b.lost(ctx); err != nil {
					return err
				}
				continue
			}
			moving = true
		}
		var arrived bool
		var target uint64
		wait := b.lastSent.Add(b.cfg.PingEvery)
		if deadline.Before(wait) {
			wait = deadline
		}
		wctx, cancel := context.WithDeadline(ctx, wait)
		err := b.c.Wait(wctx, func(v *View) bool {
			p, ok := v.Position(b.master)
			arrived = ok && b.geo.Within(p, dest, 1.5)
			b.noteHealth(v)
			if ok {
				target = b.pickMob(v, p)
			}
			return arrived || target != 0
		})
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case arrived:
			b.standing = true
			b.count(func(s *BotStats) { s.Legs++ })
			return nil
		case target != 0:
			m := b.master
			if err := b.input(ctx, func(ctx context.Context) (uint32, error) { return b.c.Attack(ctx, m, target) }); err != nil {
				if err := b.lost(ctx); err != nil {
					return err
				}
				moving = false
				continue
			}
			b.fighting = target
			b.count(func(s *BotStats) { s.Attacks++ })
		case errors.Is(err, context.DeadlineExceeded):
			if !time.Now().Before(deadline) {
				b.count(func(s *BotStats) { s.LegTimeouts++ })
				return nil
			}
			if err := b.c.Ping(ctx, uint64(time.Now().UnixNano())); err != nil {
				if err := b.lost(ctx); err != nil {
					return err
				}
				moving = false
				continue
			}
			b.lastSent = time.Now()
			b.count(func(s *BotStats) { s.Pings++ })
		case err != nil: // the socket closed
			if err := b.lost(ctx); err != nil {
				return err
			}
			moving = false
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
