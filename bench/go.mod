module github.com/shardwise/shardwise/bench

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/dgryski/go-jump v0.0.0-20170409065014-e1f439676b57
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f
	github.com/golang/groupcache v0.0.0-20241129210726-2c02b8208cf8
	github.com/serialx/hashring v0.0.0-20200727003509-22c0c7ab6b1b
	github.com/shardwise/shardwise v0.0.0
	stathat.com/c/consistent v1.0.0
)

require github.com/stretchr/testify v1.12.1 // indirect

replace github.com/shardwise/shardwise => ../
