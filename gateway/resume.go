package gateway

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/internal/binread"
)

// credentialVersion is the first byte of a resume credential.
const credentialVersion = 1

// credentialBytes is a credential's length before base64: version,
// account, epoch, secret.
const credentialBytes = 1 + 8 + 8 + 32

// CredentialLen is the length of a resume credential's text: base64url
// without padding of its 49 bytes.
var CredentialLen = base64.RawURLEncoding.EncodedLen(credentialBytes)

// Credential is a resume credential (docs/protocol.md, "Resume"): the
// session it continues and a random secret. The directory keeps only the
// secret's hash (Hash), with the session; any gateway checks a credential
// there, the one that issued it alive or not.
type Credential struct {
	Account account.ID
	Epoch   directory.Epoch
	Secret  [32]byte
}

// String is the credential's text as the client is given it and sends it
// back: base64url (RFC 4648 §5, no padding) of version 1, the account and
// the epoch as little-endian u64s, and the secret.
func (c Credential) String() string {
	b := make([]byte, 0, credentialBytes)
	b = append(b, credentialVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(c.Account))
	b = binary.LittleEndian.AppendUint64(b, uint64(c.Epoch))
	b = append(b, c.Secret[:]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Hash is what the directory keeps of the credential.
func (c Credential) Hash() directory.ResumeHash { return sha256.Sum256(c.Secret[:]) }

// ParseCredential reads a credential's text. Every error matches
// ErrMalformed and names the field and byte offset; nothing it is given
// makes it panic (FuzzParseCredential).
func ParseCredential(s string) (Credential, error) {
	if len(s) != CredentialLen {
		return Credential{}, fmt.Errorf("%w: resume credential of %d characters, want %d", ErrMalformed, len(s), CredentialLen)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return Credential{}, fmt.Errorf("%w: resume credential is not base64url: %v", ErrMalformed, err)
	}
	r := binread.New(b, "ResumeCredential", ErrMalformed)
	r.Version(credentialVersion)
	c := Credential{Account: account.ID(r.U64("Account"))}
	at := r.Offset()
	c.Epoch = directory.Epoch(r.U64("Epoch"))
	if r.Err() == nil && (!c.Account.Valid() || c.Epoch == 0) {
		r.FailAt(at-8, "Account", "account %d, epoch %d: neither may be 0", c.Account, c.Epoch)
	}
	if r.Err() == nil && r.Left() != len(c.Secret) {
		r.Fail("Secret", "%d bytes, want %d", r.Left(), len(c.Secret))
	}
	if r.Err() == nil {
		copy(c.Secret[:], b[r.Offset():])
		return c, nil
	}
	return Credential{}, r.Err()
}
