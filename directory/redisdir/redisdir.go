package redisdir

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/logintoken"
)

// DefaultKeyPrefix is Config.KeyPrefix's default.
const DefaultKeyPrefix = "shardwise:dir:"

// Config configures a Directory.
type Config struct {
	// Client is the Redis/Valkey client. Required; the caller closes it.
	Client redis.UniversalClient
	// KeyPrefix starts every key. Default DefaultKeyPrefix. It must not
	// contain '{' or '}' (the account is the hash tag).
	KeyPrefix string
	// LeaseTTL is how long a session lives after Connect or Renew, in whole
	// milliseconds. Default directory.DefaultLeaseTTL (30 s).
	LeaseTTL time.Duration
	// CounterRetention is how long an account's counters outlive its last
	// write. Default directory.DefaultCounterRetention (24 h); at least
	// LeaseTTL.
	CounterRetention time.Duration
	// Clock is used only to turn a token claim's `until` into a TTL.
	// Default clock.Real().
	Clock clock.Clock
}

func (c Config) withDefaults() Config {
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = directory.DefaultLeaseTTL
	}
	if c.CounterRetention == 0 {
		c.CounterRetention = directory.DefaultCounterRetention
	}
	c.Clock = clock.OrReal(c.Clock)
	return c
}

// Validate reports the first invalid field, after defaults are filled in.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.Client == nil {
		return errcode.Config("Client", nil, "required")
	}
	if strings.ContainsAny(c.KeyPrefix, "{}") {
		return errcode.Config("KeyPrefix", c.KeyPrefix, "must not contain '{' or '}' (the account is the hash tag)")
	}
	if c.LeaseTTL < time.Millisecond || c.LeaseTTL%time.Millisecond != 0 {
		return errcode.Config("LeaseTTL", c.LeaseTTL, "must be a positive whole number of milliseconds")
	}
	if c.CounterRetention < c.LeaseTTL || c.CounterRetention%time.Millisecond != 0 {
		return errcode.Config("CounterRetention", c.CounterRetention, "must be whole milliseconds and at least LeaseTTL")
	}
	return nil
}

// Directory is the Redis-backed directory.Directory. It holds no goroutines
// and nothing to close beyond the caller's client.
type Directory struct {
	cfg       Config
	ttlMS     string
	retainMS  string
	tokPrefix string
}

var _ directory.Directory = (*Directory)(nil)
var _ logintoken.SingleUse = (*Directory)(nil)

// New validates cfg and returns a Directory. It does not contact Redis.
func New(cfg Config) (*Directory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Directory{
		cfg:       cfg,
		ttlMS:     strconv.FormatInt(cfg.LeaseTTL.Milliseconds(), 10),
		retainMS:  strconv.FormatInt(cfg.CounterRetention.Milliseconds(), 10),
		tokPrefix: cfg.KeyPrefix + "tok:",
	}, nil
}

// SessionKey returns the key of account's session hash (its TTL is the
// lease), for operators and tests.
func (d *Directory) SessionKey(account account.ID) string {
	return d.cfg.KeyPrefix + "{@" + account.String() + "}:s"
}

// CountersKey returns the key of account's counters hash.
func (d *Directory) CountersKey(account account.ID) string {
	return d.cfg.KeyPrefix + "{@" + account.String() + "}:c"
}

// ResumeKey returns the key of account's armed resume credential (the
// secret's hash; its TTL is the window).
func (d *Directory) ResumeKey(account account.ID) string {
	return d.cfg.KeyPrefix + "{@" + account.String() + "}:r"
}

// The account in a key is its canonical text (account.ID.String: decimal
// digits), so the tag "@<digits>" is never empty and never holds a brace,
// and the two keys of an account always share one cluster slot. The '@'
// dates from when accounts were any string (one starting with '}' gave an
// empty tag); it stays so that the keys of an account whose old name was
// already its decimal text are the keys it has now.

// TokenKey returns the key that records a claimed token id.
func (d *Directory) TokenKey(id logintoken.ID) string { return d.tokPrefix + id.String() }

// nowMS and nowUS in the scripts read Redis's clock.
const luaTime = `
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = math.floor(now_us / 1000)
local function num(x) return string.format('%.0f', x) end
`

// Session fields, in the order every script returns them after its status:
// epoch, gateway, master node, master version, has master, lease expiry ms.
const sessionFields = `'e', 'g', 'mn', 'mv', 'hm', 'x'`

// connectBody: KEYS session, counters; ARGV gateway, ttl ms, retention ms.
// Returns the new session's six fields, then the displaced session's six
// (empty strings when there was none).
const connectBody = `
local ctr = redis.call('HMGET', KEYS[2], 'e', 'r')
local prev = redis.call('HMGET', KEYS[1], ` + sessionFields + `)
-- the live session's epoch counts too, should the counters have been lost
local epoch = math.max(tonumber(ctr[1] or '0'), tonumber(prev[1] or '0')) + 1
if now_us > epoch then epoch = now_us end
local es = num(epoch)
local mn, mv, hm = '0', ctr[2] or '0', '0'
if prev[1] then mn, mv, hm = prev[3], prev[4], prev[5] end
local exp = num(now_ms + tonumber(ARGV[2]))
redis.call('HSET', KEYS[1], 'e', es, 'g', ARGV[1], 'mn', mn, 'mv', mv, 'hm', hm, 'x', exp)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[2], 'e', es)
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return {es, ARGV[1], mn, mv, hm, exp,
  prev[1] or '', prev[2] or '', prev[3] or '', prev[4] or '', prev[5] or '', prev[6] or ''}
`

var connectScript = redis.NewScript(luaTime + connectBody)

// resumeScript: KEYS session, counters, resume; ARGV gateway, ttl ms,
// retention ms (connectBody's), the credential's epoch, its hash (hex).
// Returns {'X', reason} for a refusal, else what connectBody returns.
var resumeScript = redis.NewScript(luaTime + `
local newest = math.max(tonumber(redis.call('HGET', KEYS[2], 'e') or '0'), tonumber(redis.call('HGET', KEYS[1], 'e') or '0'))
if newest > tonumber(ARGV[4]) then return {'X', 'superseded'} end
local r = redis.call('HMGET', KEYS[3], 'e', 'h', 'x')
if r[1] ~= ARGV[4] then return {'X', 'unknown'} end
if r[2] ~= ARGV[5] then return {'X', 'mismatch'} end
if now_ms >= tonumber(r[3]) then return {'X', 'expired'} end
redis.call('DEL', KEYS[3])
` + connectBody)

// armResumeScript: KEYS session, resume; ARGV epoch, hash (hex), window
// ms. The resume hash's TTL is the window, restarted by renewScript.
var armResumeScript = redis.NewScript(luaTime + `
local e = redis.call('HGET', KEYS[1], 'e')
if not e then return {'N'} end
if e ~= ARGV[1] then return {'S', e} end
redis.call('HSET', KEYS[2], 'e', ARGV[1], 'h', ARGV[2], 'w', ARGV[3], 'x', num(now_ms + tonumber(ARGV[3])))
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return {'K'}
`)

// revokeResumeScript: KEYS resume; ARGV epoch.
var revokeResumeScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'e') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return {'K'}
`)

// Status replies of the fenced scripts: 'K' ok then six fields; 'N' no live
// session; 'S' stale epoch then the current epoch; 'R' stale route then the
// current master node, version and has-master.

// renewScript: KEYS session, counters, resume; ARGV epoch, ttl ms,
// retention ms. An armed resume credential of the epoch gets its window
// again.
var renewScript = redis.NewScript(luaTime + `
local cur = redis.call('HMGET', KEYS[1], ` + sessionFields + `)
if not cur[1] then return {'N'} end
if cur[1] ~= ARGV[1] then return {'S', cur[1]} end
local exp = num(now_ms + tonumber(ARGV[2]))
redis.call('HSET', KEYS[1], 'x', exp)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
-- a session renewed past CounterRetention must not lose its floors
local ctr = redis.call('HMGET', KEYS[2], 'e', 'r')
if tonumber(ctr[1] or '0') < tonumber(cur[1]) then redis.call('HSET', KEYS[2], 'e', cur[1]) end
if tonumber(ctr[2] or '0') < tonumber(cur[4]) then redis.call('HSET', KEYS[2], 'r', cur[4]) end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
local re = redis.call('HMGET', KEYS[3], 'e', 'w')
if re[1] == ARGV[1] then
  redis.call('HSET', KEYS[3], 'x', num(now_ms + tonumber(re[2])))
  redis.call('PEXPIRE', KEYS[3], re[2])
end
return {'K', cur[1], cur[2], cur[3], cur[4], cur[5], exp}
`)

// setMasterScript: KEYS session, counters; ARGV epoch, node, version,
// retention ms.
var setMasterScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], ` + sessionFields + `)
if not cur[1] then return {'N'} end
if cur[1] ~= ARGV[1] then return {'S', cur[1]} end
local v, cv = tonumber(ARGV[3]), tonumber(cur[4])
if v == cv and cur[5] == '1' and cur[3] == ARGV[2] then
  return {'K', cur[1], cur[2], cur[3], cur[4], cur[5], cur[6]}
end
if v <= cv then return {'R', cur[3], cur[4], cur[5]} end
redis.call('HSET', KEYS[1], 'mn', ARGV[2], 'mv', ARGV[3], 'hm', '1')
redis.call('HSET', KEYS[2], 'r', ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return {'K', cur[1], cur[2], ARGV[2], ARGV[3], '1', cur[6]}
`)

// releaseScript: KEYS session; ARGV epoch.
var releaseScript = redis.NewScript(`
local e = redis.call('HGET', KEYS[1], 'e')
if not e then return {'N'} end
if e ~= ARGV[1] then return {'S', e} end
redis.call('DEL', KEYS[1])
return {'K'}
`)

// storeErr turns a client error into the error the port promises: the
// context's error as is (wrapped), anything else as unavailable.
func storeErr(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return fmt.Errorf("directory: %s: %w", op, err)
	}
	return &directory.UnavailableError{Op: op, Err: err}
}

func epochString(e directory.Epoch) string { return strconv.FormatUint(uint64(e), 10) }

// strs converts a script reply to strings; anything else is a broken
// script, reported as unavailable rather than guessed at.
func strs(op string, reply any) ([]string, error) {
	items, ok := reply.([]any)
	if !ok {
		return nil, &directory.UnavailableError{Op: op, Err: fmt.Errorf("unexpected reply %T", reply)}
	}
	out := make([]string, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, &directory.UnavailableError{Op: op, Err: fmt.Errorf("unexpected reply item %d: %T", i, it)}
		}
		out[i] = s
	}
	return out, nil
}

// parseSession reads the six session fields.
func parseSession(op string, account account.ID, f []string) (directory.Session, error) {
	if len(f) != 6 {
		return directory.Session{}, &directory.UnavailableError{Op: op, Err: fmt.Errorf("session reply has %d fields", len(f))}
	}
	epoch, err1 := strconv.ParseUint(f[0], 10, 64)
	gw, err2 := strconv.ParseUint(f[1], 10, 8)
	mn, err3 := strconv.ParseUint(f[2], 10, 8)
	mv, err4 := strconv.ParseUint(f[3], 10, 64)
	exp, err5 := strconv.ParseInt(f[5], 10, 64)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil || (f[4] != "0" && f[4] != "1") {
		return directory.Session{}, &directory.UnavailableError{Op: op, Err: fmt.Errorf("corrupt session entry %q: %v", f, err)}
	}
	return directory.Session{
		Account:     account,
		Epoch:       directory.Epoch(epoch),
		Gateway:     directory.NodeID(gw),
		Master:      directory.Route{Node: directory.NodeID(mn), Version: mv},
		HasMaster:   f[4] == "1",
		LeaseExpiry: time.UnixMilli(exp),
	}, nil
}

// fenced interprets the status reply of renew, setMaster and release.
func fenced(op string, account account.ID, epoch directory.Epoch, route directory.Route, f []string) (directory.Session, error) {
	if len(f) == 0 {
		return directory.Session{}, &directory.UnavailableError{Op: op, Err: errors.New("empty reply")}
	}
	switch f[0] {
	case "K":
		if len(f) == 1 {
			return directory.Session{}, nil
		}
		return parseSession(op, account, f[1:])
	case "N":
		if len(f) != 1 {
			return directory.Session{}, &directory.UnavailableError{Op: op, Err: fmt.Errorf("not-found reply has %d fields", len(f))}
		}
		return directory.Session{}, directory.ErrNotFound.Wrap("%s of account %s with epoch %d", op, account, epoch)
	case "S":
		if len(f) != 2 {
			return directory.Session{}, &directory.UnavailableError{Op: op, Err: fmt.Errorf("stale-epoch reply has %d fields", len(f))}
		}
		cur, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return directory.Session{}, &directory.UnavailableError{Op: op, Err: fmt.Errorf("corrupt epoch %q", f[1])}
		}
		return directory.Session{}, &directory.StaleEpochError{Op: op, Account: account, Epoch: epoch, Current: directory.Epoch(cur)}
	case "R":
		if len(f) != 4 {
			return directory.Session{}, &directory.UnavailableError{Op: op, Err: fmt.Errorf("stale-route reply has %d fields", len(f))}
		}
		node, err1 := strconv.ParseUint(f[1], 10, 8)
		ver, err2 := strconv.ParseUint(f[2], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return directory.Session{}, &directory.UnavailableError{Op: op, Err: fmt.Errorf("corrupt route %q: %v", f, err)}
		}
		return directory.Session{}, &directory.StaleRouteError{Account: account, Route: route,
			Current: directory.Route{Node: directory.NodeID(node), Version: ver}, HasMaster: f[3] == "1"}
	}
	return directory.Session{}, &directory.UnavailableError{Op: op, Err: fmt.Errorf("unknown status %q", f[0])}
}

// Connect implements directory.Directory.
func (d *Directory) Connect(ctx context.Context, account account.ID, gateway directory.NodeID) (directory.Session, directory.Session, error) {
	if err := directory.CheckAccount(account); err != nil {
		return directory.Session{}, directory.Session{}, err
	}
	if err := ctx.Err(); err != nil {
		return directory.Session{}, directory.Session{}, err
	}
	reply, err := connectScript.Run(ctx, d.cfg.Client,
		[]string{d.SessionKey(account), d.CountersKey(account)},
		strconv.Itoa(int(gateway)), d.ttlMS, d.retainMS).Result()
	if err != nil {
		return directory.Session{}, directory.Session{}, storeErr(ctx, directory.OpConnect, err)
	}
	f, err := strs(directory.OpConnect, reply)
	if err != nil {
		return directory.Session{}, directory.Session{}, err
	}
	return parseConnect(directory.OpConnect, account, f)
}

// parseConnect reads connectBody's twelve fields.
func parseConnect(op string, account account.ID, f []string) (directory.Session, directory.Session, error) {
	if len(f) != 12 {
		return directory.Session{}, directory.Session{}, &directory.UnavailableError{Op: op, Err: fmt.Errorf("reply has %d fields", len(f))}
	}
	s, err := parseSession(op, account, f[:6])
	if err != nil {
		return directory.Session{}, directory.Session{}, err
	}
	var prev directory.Session
	if f[6] != "" {
		if prev, err = parseSession(op, account, f[6:]); err != nil {
			return directory.Session{}, directory.Session{}, err
		}
	}
	return s, prev, nil
}

// ArmResume implements directory.Directory.
func (d *Directory) ArmResume(ctx context.Context, account account.ID, epoch directory.Epoch, hash directory.ResumeHash, window time.Duration) error {
	if err := directory.CheckWindow(window); err != nil {
		return err
	}
	_, err := d.runFenced(ctx, directory.OpArmResume, armResumeScript, account, epoch, directory.Route{},
		[]string{d.SessionKey(account), d.ResumeKey(account)},
		epochString(epoch), hex.EncodeToString(hash[:]), strconv.FormatInt(window.Milliseconds(), 10))
	return err
}

// Resume implements directory.Directory.
func (d *Directory) Resume(ctx context.Context, account account.ID, epoch directory.Epoch, hash directory.ResumeHash, gateway directory.NodeID) (directory.Session, directory.Session, error) {
	if err := directory.CheckAccount(account); err != nil {
		return directory.Session{}, directory.Session{}, err
	}
	if err := directory.CheckEpoch(epoch); err != nil {
		return directory.Session{}, directory.Session{}, err
	}
	if err := ctx.Err(); err != nil {
		return directory.Session{}, directory.Session{}, err
	}
	reply, err := resumeScript.Run(ctx, d.cfg.Client,
		[]string{d.SessionKey(account), d.CountersKey(account), d.ResumeKey(account)},
		strconv.Itoa(int(gateway)), d.ttlMS, d.retainMS, epochString(epoch), hex.EncodeToString(hash[:])).Result()
	if err != nil {
		return directory.Session{}, directory.Session{}, storeErr(ctx, directory.OpResume, err)
	}
	f, err := strs(directory.OpResume, reply)
	if err != nil {
		return directory.Session{}, directory.Session{}, err
	}
	return resumeReply(account, epoch, f)
}

// resumeReply interprets resumeScript's reply: {'X', reason} or
// connectBody's twelve fields.
func resumeReply(account account.ID, epoch directory.Epoch, f []string) (directory.Session, directory.Session, error) {
	if len(f) > 0 && f[0] == "X" {
		if len(f) == 2 {
			switch f[1] {
			case directory.ResumeSuperseded, directory.ResumeUnknown, directory.ResumeMismatch, directory.ResumeExpired:
				return directory.Session{}, directory.Session{}, &directory.ResumeRefusedError{Account: account, Epoch: epoch, Reason: f[1]}
			}
		}
		return directory.Session{}, directory.Session{}, &directory.UnavailableError{Op: directory.OpResume, Err: fmt.Errorf("unknown refusal %q", f)}
	}
	return parseConnect(directory.OpResume, account, f)
}

// RevokeResume implements directory.Directory.
func (d *Directory) RevokeResume(ctx context.Context, account account.ID, epoch directory.Epoch) error {
	_, err := d.runFenced(ctx, directory.OpRevoke, revokeResumeScript, account, epoch, directory.Route{},
		[]string{d.ResumeKey(account)}, epochString(epoch))
	return err
}

func (d *Directory) runFenced(ctx context.Context, op string, script *redis.Script, account account.ID, epoch directory.Epoch, route directory.Route, keys []string, args ...any) (directory.Session, error) {
	if err := directory.CheckAccount(account); err != nil {
		return directory.Session{}, err
	}
	if err := directory.CheckEpoch(epoch); err != nil {
		return directory.Session{}, err
	}
	if err := ctx.Err(); err != nil {
		return directory.Session{}, err
	}
	reply, err := script.Run(ctx, d.cfg.Client, keys, args...).Result()
	if err != nil {
		return directory.Session{}, storeErr(ctx, op, err)
	}
	f, err := strs(op, reply)
	if err != nil {
		return directory.Session{}, err
	}
	return fenced(op, account, epoch, route, f)
}

// Renew implements directory.Directory.
func (d *Directory) Renew(ctx context.Context, account account.ID, epoch directory.Epoch) (directory.Session, error) {
	return d.runFenced(ctx, directory.OpRenew, renewScript, account, epoch, directory.Route{},
		[]string{d.SessionKey(account), d.CountersKey(account), d.ResumeKey(account)}, epochString(epoch), d.ttlMS, d.retainMS)
}

// SetMaster implements directory.Directory.
func (d *Directory) SetMaster(ctx context.Context, account account.ID, epoch directory.Epoch, route directory.Route) (directory.Session, error) {
	if err := directory.CheckRoute(route); err != nil {
		return directory.Session{}, err
	}
	return d.runFenced(ctx, directory.OpSetMaster, setMasterScript, account, epoch, route,
		[]string{d.SessionKey(account), d.CountersKey(account)},
		epochString(epoch), strconv.Itoa(int(route.Node)), strconv.FormatUint(route.Version, 10), d.retainMS)
}

// Release implements directory.Directory.
func (d *Directory) Release(ctx context.Context, account account.ID, epoch directory.Epoch) error {
	_, err := d.runFenced(ctx, directory.OpRelease, releaseScript, account, epoch, directory.Route{},
		[]string{d.SessionKey(account)}, epochString(epoch))
	return err
}

// Lookup implements directory.Directory. One HMGET: Redis never returns a
// key whose TTL has passed, so an expired lease reads as not found.
func (d *Directory) Lookup(ctx context.Context, account account.ID) (directory.Session, error) {
	if err := directory.CheckAccount(account); err != nil {
		return directory.Session{}, err
	}
	if err := ctx.Err(); err != nil {
		return directory.Session{}, err
	}
	vals, err := d.cfg.Client.HMGet(ctx, d.SessionKey(account), "e", "g", "mn", "mv", "hm", "x").Result()
	if err != nil {
		return directory.Session{}, storeErr(ctx, directory.OpLookup, err)
	}
	if vals[0] == nil {
		return directory.Session{}, directory.ErrNotFound.Wrap("account %s", account)
	}
	f, err := strs(directory.OpLookup, vals)
	if err != nil {
		return directory.Session{}, err
	}
	return parseSession(directory.OpLookup, account, f)
}

// ClaimToken implements directory.Directory and logintoken.SingleUse with
// SET NX PX: the first claim creates the key, later ones find it.
func (d *Directory) ClaimToken(ctx context.Context, id logintoken.ID, until time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := d.cfg.Clock.Now()
	ttl := until.Sub(now)
	if ttl <= 0 {
		return directory.ErrInvalidArgument.Wrap("token %s claimed until %v, which is not after now %v", id, until, now)
	}
	// Round up: the key must outlive `until`, never expire just before it.
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	ok, err := d.cfg.Client.SetNX(ctx, d.TokenKey(id), 1, ttl).Result()
	if err != nil {
		return storeErr(ctx, directory.OpClaimToken, err)
	}
	if !ok {
		return directory.ReplayedError(id)
	}
	return nil
}
