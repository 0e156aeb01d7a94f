package main

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestServesAndAdvertises(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	addr := "127.0.0.1:" + strconv.Itoa(port)
	stop := make(chan struct{})
	done := make(chan int)
	var stderr bytes.Buffer
	go func() {
		done <- run([]string{"--listen", addr, "--advertise", addr, "--cluster-id", "abc"}, &stderr, stop)
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.Eventually(t, func() bool {
		_, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "t")
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr())
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	require.NoError(t, err)
	require.Len(t, md.Brokers, 1)
	assert.Equal(t, int32(port), md.Brokers[0].Port, "advertises --advertise")
	assert.Equal(t, "abc", md.Cluster)
	close(stop)
	assert.Equal(t, 0, <-done)
}

func TestBadFlags(t *testing.T) {
	var stderr bytes.Buffer
	assert.Equal(t, 2, run([]string{"--advertise", "nohost"}, &stderr, nil))
	assert.Contains(t, stderr.String(), "want HOST:PORT")
	assert.Equal(t, 0, run([]string{"--help"}, &stderr, nil))
}
