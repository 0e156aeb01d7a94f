package metadata

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkReplay measures replaying a metadata log of 1 000 topics with 10
// partitions each, decoding every record first, in batches of 11 records (a
// topic and its partitions: one CreateTopics each) and in the merged
// batches the local quorum's replay hands over.
func BenchmarkReplay(b *testing.B) {
	for _, batch := range []int{11, 8195} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { benchmarkReplay(b, batch) })
	}
}

func benchmarkReplay(b *testing.B, batch int) {
	var frames [][]byte
	for i := range 1000 {
		id := Uuid{byte(i), byte(i >> 8), 1}
		frames = append(frames, Encode(&TopicRecord{Name: "topic-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)), TopicID: id}))
		for p := range int32(10) {
			frames = append(frames, Encode(&PartitionRecord{PartitionID: p, TopicID: id, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}))
		}
	}
	var size int64
	for _, f := range frames {
		size += int64(len(f))
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for range b.N {
		im := NewImage("c")
		for i := 0; i < len(frames); i += batch {
			recs := make([]Record, 0, batch)
			for _, f := range frames[i:min(i+batch, len(frames))] {
				r, err := Decode(f)
				if err != nil {
					b.Fatal(err)
				}
				recs = append(recs, r)
			}
			var err error
			im, err = im.ApplyBatch(int64(i+len(recs)-1), recs)
			if err != nil {
				b.Fatal(err)
			}
		}
		require.Len(b, im.Topics, 1000)
	}
}
