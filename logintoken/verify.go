package logintoken

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
)

// Defaults filled in by VerifierConfig.withDefaults and IssuerConfig.withDefaults.
const (
	DefaultLeeway      = 2 * time.Second
	DefaultMaxLifetime = 10 * time.Minute
	DefaultTTL         = 2 * time.Minute
	// MaxLeeway bounds Leeway: a larger allowance for clock skew would keep
	// expired tokens usable for too long.
	MaxLeeway = time.Minute
)

// VerifierConfig configures a node's Verifier.
type VerifierConfig struct {
	// Cluster is this cluster's id; tokens for another cluster are refused.
	// Required.
	Cluster string
	// Audience is the service kind this verifier accepts tokens for (for
	// example "gateway"). Required.
	Audience string
	// Keys are the login service's public keys this node trusts; more than
	// one during a key rotation. Required, each ed25519.PublicKeySize bytes.
	Keys []ed25519.PublicKey
	// Leeway is the clock skew allowed on both the issue time and the expiry.
	// Default DefaultLeeway (2 s); 0 < Leeway <= MaxLeeway; negative means 0.
	Leeway time.Duration
	// MaxLifetime refuses tokens whose expiry is further than this after
	// their issue time. Default DefaultMaxLifetime (10 min).
	MaxLifetime time.Duration
	// SingleUse is the cluster-wide record of used token ids (the session
	// directory). Required: without it a token could be replayed on another
	// node.
	SingleUse SingleUse
	// Clock reads the time. Default clock.Real().
	Clock clock.Clock
}

func (c VerifierConfig) withDefaults() VerifierConfig {
	if c.Leeway == 0 {
		c.Leeway = DefaultLeeway
	}
	if c.Leeway < 0 {
		c.Leeway = 0
	}
	if c.MaxLifetime == 0 {
		c.MaxLifetime = DefaultMaxLifetime
	}
	c.Clock = clock.OrReal(c.Clock)
	return c
}

// Validate reports the first invalid field, after defaults are filled in.
func (c VerifierConfig) Validate() error {
	c = c.withDefaults()
	if c.Cluster == "" || len(c.Cluster) > MaxClusterLen {
		return errcode.Config("Cluster", c.Cluster, "must be 1..64 bytes")
	}
	if c.Audience == "" || len(c.Audience) > MaxAudienceLen {
		return errcode.Config("Audience", c.Audience, "must be 1..64 bytes")
	}
	if len(c.Keys) == 0 {
		return errcode.Config("Keys", len(c.Keys), "at least one public key is required")
	}
	for i, k := range c.Keys {
		if len(k) != ed25519.PublicKeySize {
			return errcode.Config("Keys", i, "key is not an Ed25519 public key (32 bytes)")
		}
	}
	if c.Leeway > MaxLeeway {
		return errcode.Config("Leeway", c.Leeway, "must be at most 1m0s")
	}
	if c.MaxLifetime < 0 {
		return errcode.Config("MaxLifetime", c.MaxLifetime, "must be positive")
	}
	if c.SingleUse == nil {
		return errcode.Config("SingleUse", nil, "required: the cluster-wide single-use store (the session directory)")
	}
	return nil
}

// Verifier checks tokens on a node. It is safe for concurrent use.
type Verifier struct {
	cfg  VerifierConfig
	keys map[KeyID]ed25519.PublicKey
}

// NewVerifier validates cfg and returns a Verifier.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	keys := make(map[KeyID]ed25519.PublicKey, len(cfg.Keys))
	for _, k := range cfg.Keys {
		keys[KeyIDOf(k)] = k
	}
	return &Verifier{cfg: cfg, keys: keys}, nil
}

// Check verifies everything but single use: encoding, signature, cluster,
// audience, lifetime and time window. It is Verify without the claim, for
// callers that want to test a token without consuming it.
func (v *Verifier) Check(token string) (Claims, error) {
	t, err := Decode(token)
	if err != nil {
		return Claims{}, err
	}
	c := t.Claims
	pub, ok := v.keys[c.Key]
	if !ok {
		return Claims{}, ErrUnknownKey.Wrap("key %s", c.Key)
	}
	if !ed25519.Verify(pub, signedMessage(t.payload), t.Signature[:]) {
		return Claims{}, ErrBadSignature.Wrap("key %s, token %s", c.Key, c.ID)
	}
	if c.Cluster != v.cfg.Cluster {
		return Claims{}, ErrWrongCluster.Wrap("token for %q, this is %q", c.Cluster, v.cfg.Cluster)
	}
	if c.Audience != v.cfg.Audience {
		return Claims{}, ErrWrongAudience.Wrap("token for %q, this is %q", c.Audience, v.cfg.Audience)
	}
	if life := c.ExpiresAt.Sub(c.IssuedAt); life > v.cfg.MaxLifetime {
		return Claims{}, ErrTooLongLived.Wrap("lifetime %v, at most %v", life, v.cfg.MaxLifetime)
	}
	now := v.cfg.Clock.Now()
	if now.Add(v.cfg.Leeway).Before(c.IssuedAt) {
		return Claims{}, ErrNotYetValid.Wrap("issued at %v, now %v", c.IssuedAt, now)
	}
	if !now.Before(c.ExpiresAt.Add(v.cfg.Leeway)) {
		return Claims{}, ErrExpired.Wrap("expired at %v, now %v", c.ExpiresAt, now)
	}
	return c, nil
}

// Verify checks the token (see Check) and then claims its id in the
// single-use store, so it succeeds once per token across the cluster. A
// store error refuses the token: when in doubt, no login.
func (v *Verifier) Verify(ctx context.Context, token string) (Claims, error) {
	c, err := v.Check(token)
	if err != nil {
		return Claims{}, err
	}
	// Remember the id for as long as any node could still accept the token.
	// Another node accepts it until ExpiresAt+Leeway by its own clock, and
	// that clock may lag the one the store measures the claim with by up to
	// Leeway (the skew the leeway exists for), so expiry+leeway alone would
	// let a lagging node accept a replay in the last Leeway of its window.
	if err := v.cfg.SingleUse.ClaimToken(ctx, c.ID, c.ExpiresAt.Add(2*v.cfg.Leeway)); err != nil {
		return Claims{}, err
	}
	return c, nil
}

// IssuerConfig configures the login service's Issuer.
type IssuerConfig struct {
	// Cluster is the cluster id written into every token. Required.
	Cluster string
	// Key is the login service's private key. Required.
	Key ed25519.PrivateKey
	// TTL is how long a token is valid after issue. Default DefaultTTL (2 min).
	TTL time.Duration
	// Clock reads the time. Default clock.Real().
	Clock clock.Clock
	// Rand is the source of token ids. Default crypto/rand.Reader.
	Rand io.Reader
}

func (c IssuerConfig) withDefaults() IssuerConfig {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	c.Clock = clock.OrReal(c.Clock)
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
	return c
}

// Validate reports the first invalid field, after defaults are filled in.
func (c IssuerConfig) Validate() error {
	c = c.withDefaults()
	if c.Cluster == "" || len(c.Cluster) > MaxClusterLen {
		return errcode.Config("Cluster", c.Cluster, "must be 1..64 bytes")
	}
	if len(c.Key) != ed25519.PrivateKeySize {
		return errcode.Config("Key", len(c.Key), "not an Ed25519 private key (64 bytes)")
	}
	if c.TTL < time.Millisecond {
		return errcode.Config("TTL", c.TTL, "must be at least 1ms")
	}
	return nil
}

// Issuer mints tokens. It is safe for concurrent use if Rand is.
type Issuer struct {
	cfg IssuerConfig
	key KeyID
}

// NewIssuer validates cfg and returns an Issuer.
func NewIssuer(cfg IssuerConfig) (*Issuer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Issuer{cfg: cfg.withDefaults(), key: KeyIDOf(cfg.Key.Public().(ed25519.PublicKey))}, nil
}

// Issue returns a new token for acct and audience, and its claims. acct
// must not be account.None.
func (i *Issuer) Issue(acct account.ID, audience string) (string, Claims, error) {
	now := i.cfg.Clock.Now().Truncate(time.Millisecond)
	c := Claims{
		IssuedAt:  now,
		ExpiresAt: now.Add(i.cfg.TTL),
		Cluster:   i.cfg.Cluster,
		Audience:  audience,
		Account:   acct,
		Key:       i.key,
	}
	if _, err := io.ReadFull(i.cfg.Rand, c.ID[:]); err != nil {
		return "", Claims{}, err
	}
	s, err := sign(c, i.cfg.Key)
	if err != nil {
		return "", Claims{}, err
	}
	return s, c, nil
}
