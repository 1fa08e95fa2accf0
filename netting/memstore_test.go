package netting_test

import (
	"testing"

	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/storetest"
)

func TestMemStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) netting.Store {
		s := netting.NewMemStore()
		t.Cleanup(func() { s.Close() })
		return s
	})
}
