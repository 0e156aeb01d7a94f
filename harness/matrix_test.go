package harness

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
	"github.com/faultline/faultline/workloads/queue"
)

func TestMatrixCountsAndNames(t *testing.T) {
	faults, _ := availableFaults()
	require.Len(t, faults, len(matrixFaults), "every column's kind exists: none, kill, pause, partition, leader-loss, power, power-all, disk, mixed, stop, rolling-restart, membership, lagging-failover, packet, composed")
	bugs := len(plantedBugs)
	cells := MatrixCells(DefaultTest())
	assert.Len(t, matrixConfigs(), 16, "acks 1/all × min ISR 1/2 × unclean on/off × flush default/per message")
	assert.Len(t, cells, 16*len(faults)+2*bugs+bugs*len(faults))
	names := map[string]bool{}
	reg := workloads.Registry{"queue": queue.New}
	for _, c := range cells {
		assert.False(t, names[c.Test.Name], "cell names are unique: %s", c.Test.Name)
		names[c.Test.Name] = true
		assert.True(t, strings.HasPrefix(c.Test.Name, "m-"), c.Test.Name)
		assert.Contains(t, []string{ExpectValid, ExpectInvalid, ExpectEither}, c.Expect, c.Test.Name)
		assert.NoError(t, c.Test.Validate(reg), c.Test.Name)
	}
}

func TestMatrixExpectations(t *testing.T) {
	byName := map[string]MatrixCell{}
	for _, c := range MatrixCells(DefaultTest()) {
		byName[c.Test.Name] = c
	}
	for name, want := range map[string]string{
		"m-acksall.isr2.clean.flushdef-kill":        ExpectValid,
		"m-acksall.isr2.clean.flushdef-partition":   ExpectValid,
		"m-acksall.isr2.clean.flushdef-disk":        ExpectValid,
		"m-acksall.isr2.clean.flushdef-packet":      ExpectValid,
		"m-acksall.isr2.clean.flushdef-composed":    ExpectValid,
		"m-acksall.isr2.clean.flushdef-membership":  ExpectValid,
		"m-acksall.isr2.clean.flushdef-power":       ExpectEither,
		"m-acksall.isr2.clean.flushdef-power-all":   ExpectInvalid,
		"m-acksall.isr2.clean.flushmsg-power":       ExpectValid,
		"m-acksall.isr2.clean.flushmsg-power-all":   ExpectValid,
		"m-acks1.isr2.clean.flushdef-leader-loss":   ExpectInvalid,
		"m-acks1.isr1.unclean.flushmsg-kill":        ExpectEither,
		"m-acksall.isr1.clean.flushdef-partition":   ExpectEither,
		"m-acksall.isr2.unclean.flushmsg-power-all": ExpectEither,
		"m-planted-ack-before-isr":                  ExpectInvalid,
		"m-control-ack-before-isr":                  ExpectValid,
		"m-planted-ack-before-isr-x-kill":           ExpectEither,
	} {
		c, ok := byName[name]
		if assert.True(t, ok, "cell %s exists", name) {
			assert.Equal(t, want, c.Expect, "%s: %s", name, c.Why)
		}
	}
	g := byName["m-acksall.isr2.clean.flushmsg-power"].Test
	assert.Equal(t, "1", g.BrokerConfig["log.flush.interval.messages"])
	assert.Equal(t, "2", g.BrokerConfig["min.insync.replicas"])
	assert.Equal(t, workloads.AcksAll, g.Acks)
	p := byName["m-planted-ack-before-isr-x-power"]
	assert.Equal(t, "unsafe.ack.before.isr", p.Bug)
	assert.Equal(t, "true", p.Test.BrokerConfig["unsafe.enable"])
	assert.Equal(t, "1", p.Test.BrokerConfig["log.flush.interval.messages"], "a planted bug under power loss runs with the flush the guarantee needs")
	assert.Empty(t, byName["m-control-ack-before-isr"].Bug)
	assert.Empty(t, byName["m-control-ack-before-isr"].Test.BrokerConfig["unsafe.ack.before.isr"])
}

func TestMatrixFaultsOfKindsNotInTheTreeAreLeftOut(t *testing.T) {
	faults, specs := availableFaults()
	require.Len(t, specs, len(faults))
	for _, f := range faults {
		assert.NotEqual(t, "no-such-kind", f.List)
	}
	saved := matrixFaults
	defer func() { matrixFaults = saved }()
	matrixFaults = append(append([]MatrixFault(nil), saved...), MatrixFault{Name: "future", List: "no-such-kind"})
	more, _ := availableFaults()
	assert.Equal(t, len(faults), len(more))
}

func TestSelectMatrixCells(t *testing.T) {
	cells, err := SelectMatrixCells(MatrixCells(DefaultTest()), "m-acksall.isr2.clean.flushdef-*,m-planted-idempotence-off")
	require.NoError(t, err)
	faults, _ := availableFaults()
	assert.Len(t, cells, len(faults)+1)
	_, err = SelectMatrixCells(MatrixCells(DefaultTest()), "m-nope")
	assert.Error(t, err)
}

func TestMatrixCellsCarryThePlantedClassesAndJudgeWithThem(t *testing.T) {
	byName := map[string]MatrixCell{}
	for _, c := range MatrixCells(DefaultTest()) {
		byName[c.Test.Name] = c
	}
	named, cross := byName["m-planted-idempotence-off"], byName["m-planted-idempotence-off-x-kill"]
	assert.Equal(t, []string{checker.AnomalyDuplicate}, named.ExpectAnomalies, "the suite case's classes")
	assert.Equal(t, named.ExpectAnomalies, cross.ExpectAnomalies, "the bug under another fault looks for the same classes")
	assert.Empty(t, byName["m-control-idempotence-off"].ExpectAnomalies)

	bad := func(classes ...string) checker.Result {
		res := checker.Result{Valid: checker.Invalid, Anomalies: map[string]checker.AnomalyReport{}}
		for _, c := range classes {
			res.Anomalies[c] = checker.AnomalyReport{Count: 1}
		}
		return res
	}
	found, wrong := named.judge(bad(checker.AnomalyLostWrite))
	assert.True(t, wrong, "lost writes are not what idempotence-off produces")
	assert.Contains(t, found, "expected duplicate")
	_, wrong = named.judge(bad(checker.AnomalyLostWrite, checker.AnomalyDuplicate))
	assert.False(t, wrong, "one expected class among others is a detection")
	_, wrong = named.judge(checker.Result{Valid: checker.Valid})
	assert.False(t, wrong, "a valid run is a miss, not a wrong class")
	_, wrong = byName["m-acksall.isr2.clean.flushdef-power-all"].judge(bad(checker.AnomalyDuplicate))
	assert.False(t, wrong, "a cell without expected classes takes any invalid result")
}
