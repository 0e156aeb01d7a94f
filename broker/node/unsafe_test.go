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
	layers := func(cfg *config.Config) []any {
		return []any{storageUnsafe(cfg), replicaUnsafe(cfg), controllerUnsafe(cfg), groupUnsafe(cfg), txnUnsafe(cfg)}
	}
	cfg := &config.Config{Unsafe: map[string]bool{}}
	assert.Zero(t, trueFields(layers(cfg)...))
	for _, k := range config.UnsafeSwitches() {
		cfg := &config.Config{Unsafe: map[string]bool{k: true}}
		assert.Equal(t, 1, trueFields(layers(cfg)...), k)
	}
	fields := 0
	for _, l := range layers(cfg) {
		fields += reflect.TypeOf(l).NumField()
	}
	assert.Equal(t, len(config.UnsafeSwitches()), fields, "one field per switch")
}
