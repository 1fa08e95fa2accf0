package logintoken_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/shardwise/shardwise/logintoken"
)

// usedIDs is a one-process stand-in for the session directory's single-use
// record (directory.Memory or redisdir in a real node).
type usedIDs map[logintoken.ID]bool

func (u usedIDs) ClaimToken(_ context.Context, id logintoken.ID, _ time.Time) error {
	if u[id] {
		return logintoken.ErrReplayed
	}
	u[id] = true
	return nil
}

func Example() {
	pub, priv, _ := ed25519.GenerateKey(nil)

	// The login service signs; nodes hold only the public key.
	issuer, _ := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: "prod-eu", Key: priv})
	node, _ := logintoken.NewVerifier(logintoken.VerifierConfig{
		Cluster: "prod-eu", Audience: "gateway", Keys: []ed25519.PublicKey{pub}, SingleUse: usedIDs{},
	})

	token, _, _ := issuer.Issue(1001, "gateway")
	claims, err := node.Verify(context.Background(), token)
	fmt.Println(claims.Account, err)
	_, err = node.Verify(context.Background(), token)
	fmt.Println(errors.Is(err, logintoken.ErrReplayed))
	// Output:
	// 1001 <nil>
	// true
}
