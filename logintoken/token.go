package logintoken

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
)

// Stable error codes of this package.
const (
	CodeMalformed          = "TOKEN.MALFORMED"
	CodeUnsupportedVersion = "TOKEN.UNSUPPORTED_VERSION"
	CodeUnknownKey         = "TOKEN.UNKNOWN_KEY"
	CodeBadSignature       = "TOKEN.BAD_SIGNATURE"
	CodeWrongCluster       = "TOKEN.WRONG_CLUSTER"
	CodeWrongAudience      = "TOKEN.WRONG_AUDIENCE"
	CodeExpired            = "TOKEN.EXPIRED"
	CodeNotYetValid        = "TOKEN.NOT_YET_VALID"
	CodeTooLongLived       = "TOKEN.TOO_LONG_LIVED"
	CodeReplayed           = "TOKEN.REPLAYED"
)

var (
	// ErrMalformed: the bytes are not a token this package would produce.
	ErrMalformed = errcode.New(CodeMalformed, "logintoken: malformed token")
	// ErrUnsupportedVersion: the token's layout version is not the one this
	// package reads (Version). Version 1, whose account was text, is refused
	// this way: its holder must log in again for a new token.
	ErrUnsupportedVersion = errcode.New(CodeUnsupportedVersion, "logintoken: unsupported token version")
	// ErrUnknownKey: the token names a signing key the verifier does not hold.
	ErrUnknownKey = errcode.New(CodeUnknownKey, "logintoken: unknown signing key")
	// ErrBadSignature: the signature does not match the payload.
	ErrBadSignature = errcode.New(CodeBadSignature, "logintoken: bad signature")
	// ErrWrongCluster: the token was issued for another cluster.
	ErrWrongCluster = errcode.New(CodeWrongCluster, "logintoken: token is for another cluster")
	// ErrWrongAudience: the token was issued for another audience.
	ErrWrongAudience = errcode.New(CodeWrongAudience, "logintoken: token is for another audience")
	// ErrExpired: the token's expiry (plus leeway) has passed.
	ErrExpired = errcode.New(CodeExpired, "logintoken: token expired")
	// ErrNotYetValid: the token was issued in the future (beyond leeway).
	ErrNotYetValid = errcode.New(CodeNotYetValid, "logintoken: token not yet valid")
	// ErrTooLongLived: expiry minus issue time exceeds the verifier's
	// MaxLifetime; a leaked signing key or a misconfigured issuer.
	ErrTooLongLived = errcode.New(CodeTooLongLived, "logintoken: token lifetime too long")
	// ErrReplayed: the token id was already used. SingleUse implementations
	// return an error that matches it with errors.Is.
	ErrReplayed = errcode.New(CodeReplayed, "logintoken: token already used")
)

// ID is a token's random identifier, the key of the single-use check.
type ID [16]byte

// String returns the id in lower-case hex.
func (id ID) String() string { return fmt.Sprintf("%x", id[:]) }

// KeyID names a signing key: the first 8 bytes of SHA-256 of its public key.
// It lets a verifier hold several keys (rotation) and check one signature.
type KeyID [8]byte

// KeyIDOf returns the KeyID of a public key.
func KeyIDOf(pub ed25519.PublicKey) KeyID {
	sum := sha256.Sum256(pub)
	var k KeyID
	copy(k[:], sum[:len(k)])
	return k
}

// String returns the key id in lower-case hex.
func (k KeyID) String() string { return fmt.Sprintf("%x", k[:]) }

// Claims is what a token says.
type Claims struct {
	Key       KeyID
	ID        ID
	IssuedAt  time.Time  // millisecond precision on the wire
	ExpiresAt time.Time  // millisecond precision on the wire; after IssuedAt
	Cluster   string     // 1..MaxClusterLen bytes
	Audience  string     // 1..MaxAudienceLen bytes
	Account   account.ID // not account.None
}

// Length limits of the variable fields, in bytes.
const (
	MaxClusterLen  = 64
	MaxAudienceLen = 64
)

// SingleUse remembers which token ids were used. ClaimToken succeeds for the
// first caller of an id and returns an error matching ErrReplayed for every
// later one until at least `until`; it returns other errors when it cannot
// tell (a store that is down), and Verify then refuses the token. The session
// directory implements it.
type SingleUse interface {
	ClaimToken(ctx context.Context, id ID, until time.Time) error
}

// Wire layout, version 2 (all integers big-endian):
//
//	off  size  field
//	0    1     version (2)
//	1    8     key id
//	9    16    token id
//	25   8     issued at, Unix milliseconds (> 0)
//	33   8     expires at, Unix milliseconds (> issued at)
//	41   8     account (account.ID, not 0)
//	49   1+n   cluster: length byte then bytes
//	     1+n   audience
//	     64    Ed25519 signature over signingContext || everything before it
//
// Version 1 had no account at offset 41 but a third length-prefixed field,
// the account as text, after the audience. Decode refuses it with
// ErrUnsupportedVersion rather than guess an account.ID from text: tokens
// live minutes (MaxLifetime), so one issued before the change is replaced
// by logging in again.
const (
	// Version is the layout version Encode writes and Decode reads.
	Version       = 2
	fixedHeader   = 49
	minPayloadLen = fixedHeader + 2*(1+1)
	maxPayloadLen = fixedHeader + 2 + MaxClusterLen + MaxAudienceLen
	// MaxEncodedLen bounds the base64url text of a token; Decode refuses
	// longer input before decoding it.
	MaxEncodedLen = ((maxPayloadLen+ed25519.SignatureSize)*4 + 2) / 3
)

// signingContext separates these signatures from any other use of the key,
// and from any other layout version's.
const signingContext = "shardwise/logintoken/v2\x00"

var b64 = base64.RawURLEncoding.Strict()

// payload returns the signed bytes of c (without the signing context).
func payload(c Claims) ([]byte, error) {
	if err := checkClaims(c); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, fixedHeader+2+len(c.Cluster)+len(c.Audience)+ed25519.SignatureSize)
	buf = append(buf, Version)
	buf = append(buf, c.Key[:]...)
	buf = append(buf, c.ID[:]...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.IssuedAt.UnixMilli()))
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.ExpiresAt.UnixMilli()))
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.Account))
	for _, s := range [...]string{c.Cluster, c.Audience} {
		buf = append(buf, byte(len(s)))
		buf = append(buf, s...)
	}
	return buf, nil
}

func checkClaims(c Claims) error {
	if c.IssuedAt.UnixMilli() <= 0 {
		return ErrMalformed.Wrap("issued at %v is not after the Unix epoch", c.IssuedAt)
	}
	if c.ExpiresAt.UnixMilli() <= c.IssuedAt.UnixMilli() {
		return ErrMalformed.Wrap("expires at %v is not after issued at %v", c.ExpiresAt, c.IssuedAt)
	}
	if !c.Account.Valid() {
		return ErrMalformed.Wrap("account is None")
	}
	for _, f := range [...]struct {
		name string
		v    string
		max  int
	}{{"cluster", c.Cluster, MaxClusterLen}, {"audience", c.Audience, MaxAudienceLen}} {
		if len(f.v) == 0 || len(f.v) > f.max {
			return ErrMalformed.Wrap("%s is %d bytes, want 1..%d", f.name, len(f.v), f.max)
		}
	}
	return nil
}

func signedMessage(p []byte) []byte {
	m := make([]byte, 0, len(signingContext)+len(p))
	return append(append(m, signingContext...), p...)
}

// Sign returns the encoded token for c, signed with priv. c.Key is set from
// priv's public key. Issuer is the usual way to call it.
func Sign(c Claims, priv ed25519.PrivateKey) (string, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return "", ErrMalformed.Wrap("private key is %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	c.Key = KeyIDOf(priv.Public().(ed25519.PublicKey))
	return sign(c, priv)
}

// sign encodes c, whose Key must already name priv's public key.
func sign(c Claims, priv ed25519.PrivateKey) (string, error) {
	p, err := payload(c)
	if err != nil {
		return "", err
	}
	sig := ed25519.Sign(priv, signedMessage(p))
	return b64.EncodeToString(append(p, sig...)), nil
}

// Token is a decoded, not yet verified token.
type Token struct {
	Claims    Claims
	Signature [ed25519.SignatureSize]byte
	payload   []byte
}

// Encode returns the token's wire text. For a Token from Decode it returns
// exactly the decoded text.
func (t Token) Encode() (string, error) {
	p, err := payload(t.Claims)
	if err != nil {
		return "", err
	}
	return b64.EncodeToString(append(p, t.Signature[:]...)), nil
}

// isBase64URL reports whether c is one of the 64 characters of unpadded
// base64url, the only bytes Encode writes.
func isBase64URL(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// Decode parses the wire text strictly: canonical unpadded base64url (no
// other byte, not even a line break a lenient decoder would skip), version
// 2, every length within its limit, timestamps ordered, an account that is
// not None, no trailing bytes. Another version is ErrUnsupportedVersion,
// anything else ErrMalformed. It does not check the signature (Verifier
// does).
func Decode(s string) (Token, error) {
	if len(s) > MaxEncodedLen {
		return Token{}, ErrMalformed.Wrap("%d characters, at most %d", len(s), MaxEncodedLen)
	}
	// encoding/base64 skips \r and \n wherever they are, even in strict
	// mode: checked here, so that a token with line breaks added is not
	// taken for the one Encode wrote (invariant 3).
	for i := 0; i < len(s); i++ {
		if !isBase64URL(s[i]) {
			return Token{}, ErrMalformed.Wrap("byte %q at offset %d is not in the base64url alphabet", s[i], i)
		}
	}
	raw, err := b64.DecodeString(s)
	if err != nil {
		return Token{}, ErrMalformed.Wrap("base64url: %v", err)
	}
	if len(raw) < minPayloadLen+ed25519.SignatureSize {
		return Token{}, ErrMalformed.Wrap("%d bytes, at least %d", len(raw), minPayloadLen+ed25519.SignatureSize)
	}
	switch raw[0] {
	case Version:
	case 1:
		return Token{}, ErrUnsupportedVersion.Wrap("version 1 carried the account as text and is no longer read; this is version %d: log in again for a new token", Version)
	default:
		return Token{}, ErrUnsupportedVersion.Wrap("version %d, this package reads version %d", raw[0], Version)
	}
	var t Token
	c := &t.Claims
	copy(c.Key[:], raw[1:9])
	copy(c.ID[:], raw[9:25])
	iat := binary.BigEndian.Uint64(raw[25:33])
	exp := binary.BigEndian.Uint64(raw[33:41])
	// Bounding to int64 keeps the time conversion exact and round-trippable.
	if iat == 0 || iat > 1<<62 || exp > 1<<62 || exp <= iat {
		return Token{}, ErrMalformed.Wrap("timestamps issued %d, expires %d", iat, exp)
	}
	c.IssuedAt = time.UnixMilli(int64(iat))
	c.ExpiresAt = time.UnixMilli(int64(exp))
	c.Account = account.ID(binary.BigEndian.Uint64(raw[41:49]))
	if !c.Account.Valid() {
		return Token{}, ErrMalformed.Wrap("account is 0 (None)")
	}
	rest := raw[fixedHeader:]
	var fields [2]string
	for i, limit := range [...]int{MaxClusterLen, MaxAudienceLen} {
		if len(rest) < 1 {
			return Token{}, ErrMalformed.Wrap("truncated at field %d", i)
		}
		n := int(rest[0])
		if n == 0 || n > limit || len(rest) < 1+n {
			return Token{}, ErrMalformed.Wrap("field %d length %d (limit %d, %d bytes left)", i, n, limit, len(rest)-1)
		}
		fields[i] = string(rest[1 : 1+n])
		rest = rest[1+n:]
	}
	c.Cluster, c.Audience = fields[0], fields[1]
	if len(rest) != ed25519.SignatureSize {
		return Token{}, ErrMalformed.Wrap("%d bytes after the fields, want a %d-byte signature", len(rest), ed25519.SignatureSize)
	}
	copy(t.Signature[:], rest)
	t.payload = raw[:len(raw)-ed25519.SignatureSize]
	return t, nil
}
