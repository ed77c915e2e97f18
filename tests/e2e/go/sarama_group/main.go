// sarama consumer-group members through kgc: MEMBERS members (each its own sarama client,
// in this process) join GROUP one after the other, so that with two the group rebalances
// once the second arrives. Nothing is consumed until every member holds partitions in the
// same generation; then they consume TOPIC until EXPECT records have been received between
// them, marking each one, leave the group cleanly and print one JSON line on stdout with
// what each received and which partitions each held last; tests/e2e/test_sarama.py judges it.
//
// Usage: sarama_group BOOTSTRAP TOPIC GROUP EXPECT MEMBERS KAFKA_VERSION
//
// The configuration is sarama.NewConfig()'s except two settings a consumer group cannot
// do without: Version (sarama's default, 0.8.2, refuses consumer groups; groups need
// 0.10.2 or later) and Consumer.Offsets.Initial = OffsetOldest (the default, newest, would
// skip what the test produced before the members joined). Offsets are committed as sarama
// commits by default: every second, when a session ends and on leaving (sarama 1.22 with
// OffsetCommit v1, since Consumer.Offsets.Retention is 0). sarama's own log goes to stderr.
//
// Built by tests/e2e/test_sarama.py twice: against go.mod's IBM/sarama, and in GOPATH mode
// (GO111MODULE=off) against Debian's golang-github-shopify-sarama-dev (sarama 1.22.1, still
// under Shopify's import path, which the test puts in). Every wait is bounded and any failure
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

	"github.com/IBM/sarama"
)

type record struct {
	Member    string `json:"member"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value"`
}

// run is what the members share: what they received, and who holds partitions now.
type run struct {
	expect, members int
	cancel          context.CancelFunc
	mu              sync.Mutex
	received        []record
	holding         map[string][]int32 // member -> partitions of its current session
	lastHeld        map[string][]int32 // member -> partitions of its last session
	everyoneHolds   chan struct{}      // closed once every member holds partitions at once
	closeOnce       sync.Once
}

type member struct {
	name   string
	run    *run
	joined chan struct{} // closed at this member's first session
	once   sync.Once
}

func (m *member) Setup(session sarama.ConsumerGroupSession) error {
	r := m.run
	r.mu.Lock()
	defer r.mu.Unlock()
	held := session.Claims()[topic]
	r.holding[m.name], r.lastHeld[m.name] = held, held
	holders := 0
	for _, partitions := range r.holding {
		if len(partitions) > 0 {
			holders++
		}
	}
	if holders == r.members {
		r.closeOnce.Do(func() { close(r.everyoneHolds) })
	}
	m.once.Do(func() { close(m.joined) })
	return nil
}

func (m *member) Cleanup(sarama.ConsumerGroupSession) error {
	m.run.mu.Lock()
	defer m.run.mu.Unlock()
	delete(m.run.holding, m.name)
	return nil
}

func (m *member) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	r := m.run
	select {
	case <-r.everyoneHolds:
	case <-session.Context().Done(): // a rebalance ends this session first
		return nil
	}
	for msg := range claim.Messages() {
		r.mu.Lock()
		r.received = append(r.received, record{m.name, msg.Partition, msg.Offset, string(msg.Value)})
		done := len(r.received) >= r.expect
		r.mu.Unlock()
		session.MarkMessage(msg, "")
		if done {
			r.cancel()
		}
	}
	return nil
}

var topic string

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "sarama e2e: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 7 {
		fail("usage: sarama_group BOOTSTRAP TOPIC GROUP EXPECT MEMBERS KAFKA_VERSION")
	}
	bootstrap, group := os.Args[1], os.Args[3]
	topic = os.Args[2]
	expect, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fail("EXPECT: %v", err)
	}
	members, err := strconv.Atoi(os.Args[5])
	if err != nil || members < 1 {
		fail("MEMBERS: %v", os.Args[5])
	}
	version, err := sarama.ParseKafkaVersion(os.Args[6])
	if err != nil {
		fail("KAFKA_VERSION: %v", err)
	}
	time.AfterFunc(100*time.Second, func() { fail("overall time limit reached") })
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)

	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Second)
	defer cancel()
	r := &run{expect: expect, members: members, cancel: cancel, holding: map[string][]int32{},
		lastHeld: map[string][]int32{}, everyoneHolds: make(chan struct{})}
	var wg sync.WaitGroup
	for i := 0; i < members; i++ {
		config := sarama.NewConfig()
		config.ClientID = fmt.Sprintf("kgc-e2e-sarama-%d", i)
		config.Version = version
		config.Consumer.Offsets.Initial = sarama.OffsetOldest
		client, err := sarama.NewConsumerGroup([]string{bootstrap}, group, config)
		if err != nil {
			fail("new consumer group: %v", err)
		}
		m := &member{name: config.ClientID, run: r, joined: make(chan struct{})}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := client.Consume(ctx, []string{topic}, m); err != nil {
					fail("%s: consume: %v", m.name, err)
				}
			}
			// Leaving flushes the marked offsets (OffsetCommit) and sends LeaveGroup.
			if err := client.Close(); err != nil {
				fail("%s: close: %v", m.name, err)
			}
		}()
		select { // the next member joins a group that has already formed
		case <-m.joined:
		case <-ctx.Done():
		}
	}
	wg.Wait()
	if ctx.Err() == context.DeadlineExceeded {
		fail("received %d of %d records in time", len(r.received), expect)
	}
	out, _ := json.Marshal(map[string]interface{}{"received": r.received, "held": r.lastHeld})
	fmt.Println(string(out))
}
