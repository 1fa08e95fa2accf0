package ecs

import (
	"fmt"

	"github.com/shardwise/shardwise/errcode"
)

// Errors. Each is a sentinel for errors.Is; failures about one entity come
// wrapped in an *EntityError that names the entity and the operation.
var (
	// ErrAlive: CreateEntity was given an id that is already alive here.
	ErrAlive = errcode.New("ECS.ENTITY_ALIVE", "ecs: entity already alive")
	// ErrNotAlive: the entity does not exist in this World.
	ErrNotAlive = errcode.New("ECS.ENTITY_NOT_ALIVE", "ecs: entity not alive")
	// ErrDuplicateComponent: a component type or name is registered twice.
	ErrDuplicateComponent = errcode.New("ECS.DUPLICATE_COMPONENT", "ecs: component already registered")
	// ErrWrongType: a value of the wrong Go type was given to a type-erased store.
	ErrWrongType = errcode.New("ECS.WRONG_TYPE", "ecs: value has the wrong type for the component")
	// ErrDuplicateSystem: two systems share a name.
	ErrDuplicateSystem = errcode.New("ECS.DUPLICATE_SYSTEM", "ecs: system already added")
	// ErrClosed: the World was closed; commands are refused.
	ErrClosed = errcode.New("ECS.CLOSED", "ecs: world closed")
	// ErrRunning: Run was called while another Run is active.
	ErrRunning = errcode.New("ECS.RUNNING", "ecs: world already running")
)

// EntityError reports an operation refused for one entity. It unwraps to
// the sentinel (ErrAlive, ErrNotAlive, ErrWrongType) and carries its code.
type EntityError struct {
	Op  string // "create", "destroy", "evict", "add", …
	ID  ID
	Err error
}

func (e *EntityError) Error() string { return fmt.Sprintf("ecs: %s %d: %v", e.Op, uint64(e.ID), e.Err) }

// Unwrap returns the sentinel.
func (e *EntityError) Unwrap() error { return e.Err }

// ErrorCode returns the sentinel's code.
func (e *EntityError) ErrorCode() string { return errcode.Of(e.Err) }
