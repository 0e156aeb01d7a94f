package node

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/faultline/faultline/broker/config"
)

// trueFields counts the true bool fields of structs.
func trueFields(structs ...any) int {
	n := 0
	for _, s := range structs {
		v := reflect.ValueOf(s)
		for i := range v.NumField() {
			if v.Field(i).Bool() {
				n++
			}
		}
	}
	return n
}

// TestEveryUnsafeSwitchReachesOneDecision: each unsafe.* switch sets
// exactly one planted-bug field of one layer, and none is set without it.
func TestEveryUnsafeSwitchReachesOneDecision(t *testing.T) {
	cfg := &config.Config{Unsafe: map[string]bool{}}
	assert.Zero(t, trueFields(storageUnsafe(cfg), replicaUnsafe(cfg), controllerUnsafe(cfg), groupUnsafe(cfg)))
	for _, k := range config.UnsafeSwitches() {
		cfg := &config.Config{Unsafe: map[string]bool{k: true}}
		assert.Equal(t, 1, trueFields(storageUnsafe(cfg), replicaUnsafe(cfg), controllerUnsafe(cfg), groupUnsafe(cfg)), k)
	}
	fields := reflect.TypeOf(storageUnsafe(cfg)).NumField() + reflect.TypeOf(replicaUnsafe(cfg)).NumField() + reflect.TypeOf(controllerUnsafe(cfg)).NumField() + reflect.TypeOf(groupUnsafe(cfg)).NumField()
	assert.Equal(t, len(config.UnsafeSwitches()), fields, "one field per switch")
}
