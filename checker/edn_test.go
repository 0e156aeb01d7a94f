package checker

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEDNJepsenHistories feeds histories written in Jepsen's notation (the
// cases of kafka_test.clj, keywords for keys and values) to CheckFile.
func TestEDNJepsenHistories(t *testing.T) {
	for file, want := range map[string]string{
		"g1c-pure-wr": AnomalyG1c, "g0": AnomalyG0, "g1a": AnomalyG1a, "precommitted-read": AnomalyPrecommittedRead,
	} {
		res, err := CheckFile(filepath.Join("testdata", "edn", file+".edn"), Options{})
		require.NoError(t, err, file)
		assert.Contains(t, res.Anomalies, want, file)
		assert.Contains(t, strings.Join(res.Notes, "\n"), "EDN keys mapped to integers: :x=0", file)
	}
	res, err := CheckFile(filepath.Join("testdata", "edn", "g1c-pure-wr.edn"), Options{})
	require.NoError(t, err)
	assert.Equal(t, Invalid, res.Valid)
	assert.False(t, res.Anomalies[AnomalyG1c].Allowed)
}

func TestEDNMixedIntegersAndKeywordsDoNotCollide(t *testing.T) {
	h, notes, err := ReadEDNHistory(strings.NewReader(`{:process 0 :type :invoke :f :send :value [[:send 0 5] [:send :x :a]]}
{:process 0 :type :ok :f :send :value [[:send 0 [0 5]] [:send :x [nil :a]]]}`))
	require.NoError(t, err)
	require.Len(t, h, 2)
	assert.Equal(t, []string{"EDN keys mapped to integers: :x=1", "EDN values mapped to integers: :a=6"}, notes)
	m := h[1].Mops[1]
	assert.Equal(t, 1, m.Key)
	assert.Equal(t, int64(6), m.Value)
	assert.Nil(t, m.Offset)
	assert.Equal(t, int64(1), h[1].Index, "a missing :index is the op's position")
}

func TestEDNErrorsAreClear(t *testing.T) {
	for in, want := range map[string]string{
		`{:process 0 :type :invoke :f :send :value [[:send :x]]}`: "is not [:send k v]",
		`{:process 0 :type :invoke`:                               "unclosed",
		`[1 2]`:                                                   "not an op map",
		`{:process 0 :type :ok :f :poll :value [[:poll {:x [[:o 1]]}]]}`: "poll offset :o is not an integer",
		strings.Repeat("[", 1000): "nested deeper",
	} {
		_, _, err := ReadEDNHistory(strings.NewReader(in))
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want, in)
	}
}

func FuzzReadEDNHistory(f *testing.F) {
	for _, s := range []string{
		`{:index 0 :process 0 :type :invoke :f :txn :value [[:send :x :a] [:poll]]}`,
		`#jepsen.history.Op{:index 3, :time 3, :type :ok, :process 1, :f :poll, :value [[:poll {:x [[0 2]]}]]}`,
		`[{:process :nemesis :type :info :f :start :value #{"n1"}} {:process 0 :type :ok :f :assign :value [:x 1]}]`,
		`{:a "str\"ing" :b \c :c 1.5 :d -3N :e #_ ignored nil} ; comment`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, _, err := ReadEDNHistory(strings.NewReader(string(b)))
		if err == nil {
			_ = h.Validate()
		}
	})
}

// TestEDNInfoSendOffsetDoesNotBind: an info send's reported offset is no
// proof it committed (Jepsen's "info conflicts" case), so another send's
// record at that offset is neither inconsistent nor nonlinearizable.
func TestEDNInfoSendOffsetDoesNotBind(t *testing.T) {
	res, err := CheckFile(filepath.Join("testdata", "edn", "info-send-offset-conflicts.edn"), Options{})
	require.NoError(t, err)
	assert.Equal(t, Valid, res.Valid, "%v", res.Anomalies)
	assert.NotContains(t, res.Anomalies, AnomalyNonlinearizable)
	assert.NotContains(t, res.Anomalies, AnomalyInconsistentOffsets)
}

// TestEDNRegressions replays faultline's own histories in Jepsen's notation
// for cases where the checker once parted from kafka.clj: each must show
// the anomalies in want and none of those in absent.
func TestEDNRegressions(t *testing.T) {
	for file, c := range map[string]struct{ want, absent []string }{
		// A duplicated value is judged at the offset an op met it.
		"duplicate-met-late": {want: []string{AnomalyDuplicate}, absent: []string{AnomalyIntNonmonotonicPoll, AnomalyIntPollSkip, AnomalyPollSkip, AnomalyNonmonotonicPoll}},
		// An info poll leaves the process's position where its last ok poll left it.
		"poll-skip-after-info": {want: []string{AnomalyPollSkip}, absent: []string{AnomalyNonmonotonicPoll}},
	} {
		res, err := CheckFile(filepath.Join("testdata", "edn", file+".edn"), Options{})
		require.NoError(t, err, file)
		assert.Equal(t, Invalid, res.Valid, file)
		for _, a := range c.want {
			assert.Contains(t, res.Anomalies, a, file)
		}
		for _, a := range c.absent {
			assert.NotContains(t, res.Anomalies, a, file)
		}
	}
}
