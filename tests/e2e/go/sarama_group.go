// A sarama consumer-group member through kgc: joins GROUP, consumes TOPIC until it has
// received EXPECT records, marks each one, leaves the group cleanly and prints one JSON line
// on stdout with what it received; tests/e2e/test_sarama.py judges it.
//
// Usage: sarama_group BOOTSTRAP TOPIC GROUP EXPECT KAFKA_VERSION
//
// The configuration is sarama.NewConfig()'s except two settings a consumer group cannot
// do without: Version (sarama's default, 0.8.2, refuses consumer groups; groups need
// 0.10.2 or later) and Consumer.Offsets.Initial = OffsetOldest (the default, newest, would
// skip what the test produced before the member joined). Offsets are committed as
// sarama commits by default: every second and once more on leaving, with OffsetCommit v1
// since Consumer.Offsets.Retention is 0. sarama's own log goes to stderr.
//
// Built by the test in GOPATH mode (GO111MODULE=off) from Debian's
// golang-github-shopify-sarama-dev (sarama 1.22.1); every wait is bounded and any failure
// exits non-zero.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

type record struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value"`
}

type member struct {
	expect   int
	cancel   context.CancelFunc
	mu       sync.Mutex
	received []record
	claims   map[int32]bool
}

func (m *member) Setup(session sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, partitions := range session.Claims() {
		for _, p := range partitions {
			m.claims[p] = true
		}
	}
	return nil
}

func (m *member) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *member) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		m.mu.Lock()
		m.received = append(m.received, record{msg.Partition, msg.Offset, string(msg.Value)})
		done := len(m.received) >= m.expect
		m.mu.Unlock()
		session.MarkMessage(msg, "")
		if done {
			m.cancel()
		}
	}
	return nil
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "sarama e2e: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 6 {
		fail("usage: sarama_group BOOTSTRAP TOPIC GROUP EXPECT KAFKA_VERSION")
	}
	bootstrap, topic, group := os.Args[1], os.Args[2], os.Args[3]
	expect, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fail("EXPECT: %v", err)
	}
	version, err := sarama.ParseKafkaVersion(os.Args[5])
	if err != nil {
		fail("KAFKA_VERSION: %v", err)
	}
	time.AfterFunc(90*time.Second, func() { fail("overall time limit reached") })
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)

	config := sarama.NewConfig()
	config.ClientID = "kgc-e2e-sarama"
	config.Version = version
	config.Consumer.Offsets.Initial = sarama.OffsetOldest

	client, err := sarama.NewConsumerGroup([]string{bootstrap}, group, config)
	if err != nil {
		fail("new consumer group: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := &member{expect: expect, cancel: cancel, claims: map[int32]bool{}}
	for ctx.Err() == nil {
		if err := client.Consume(ctx, []string{topic}, m); err != nil {
			fail("consume: %v", err)
		}
	}
	if ctx.Err() == context.DeadlineExceeded {
		fail("received %d of %d records in 60 s", len(m.received), expect)
	}
	// Leaving flushes the marked offsets (OffsetCommit) and sends LeaveGroup.
	if err := client.Close(); err != nil {
		fail("close: %v", err)
	}
	claimed := []int32{}
	for p := range m.claims {
		claimed = append(claimed, p)
	}
	out, _ := json.Marshal(map[string]interface{}{"received": m.received, "claimed": claimed})
	fmt.Println(string(out))
}
