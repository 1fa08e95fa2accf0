// Package logintoken issues and verifies the tokens a client presents to a
// gateway node when it logs in.
//
// A token is signed with Ed25519: the login service holds the private key,
// every node holds only public keys, so a node that is compromised cannot
// mint logins. A token names the cluster it is for, an audience (which kind
// of service may accept it), the account (an account.ID), a random 128-bit
// token id, when it was issued and when it expires, and the id of the key
// that signed it. The wire form is a fixed binary layout, version 2 (see
// Version), in unpadded base64url; version 1 tokens, which carried the
// account as text, are refused with ErrUnsupportedVersion.
//
// It owns:
//   - the wire format and its strict decoder (Decode): one byte string per
//     token, nothing accepted that Encode would not produce;
//   - Issuer (the login service's side) and Verifier (a node's side);
//   - the SingleUse port: the one place that remembers which token ids were
//     already used. The session directory implements it (package
//     directory), so a token replayed on another node is refused there.
//
// It does not own accounts, passwords or how a client got its token, nor the
// single-use store itself.
//
// Invariants:
//  1. Verify trusts no field before the signature over the whole payload has
//     been checked with the public key the payload's key id names.
//  2. A token is accepted at most once cluster-wide: Verify's last step is
//     SingleUse.ClaimToken, which succeeds for one caller per token id, and
//     the claim is kept until the token could no longer pass the expiry
//     check anywhere: expiry plus twice the leeway, since a node accepts it
//     until expiry plus leeway by its own clock and that clock may lag the
//     store's by up to the leeway.
//  3. Decode(Encode(t)) == t and Encode(Decode(s)) == s for every s that
//     Decode accepts (the encoding is canonical).
//
// Layer: imports only the standard library, account, errcode and clock.
package logintoken
