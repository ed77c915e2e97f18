// sarama's consume-transform-produce loop through kgc: one member of GROUP (read_committed,
// no auto-commit) copies SOURCE to TARGET, up to 40 records of a partition in each
// transaction of one transactional producer: the records sent, then the member's offsets
// added with its group metadata (AddOffsetsToTxn, then TxnOffsetCommit naming the member and
// generation; sarama sends them when the transaction commits), then committed. Every third
// transaction is aborted instead, and the session ended: the next one starts each partition at
// what the group committed, as fetched through kgc.
//
// Usage: sarama_eos BOOTSTRAP SOURCE TARGET GROUP RECORDS KAFKA_VERSION
// Prints one JSON line ({"committed", "aborted", "transactions", "sessions"}) once RECORDS
// went out in committed transactions; every wait is bounded and any failure exits non-zero.
// Built by tests/e2e/test_sarama.py against the sarama of go.mod.
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

const perTransaction = 40

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "sarama eos: "+format+"\n", args...)
	os.Exit(1)
}

type copier struct {
	target, group string
	records       int
	producer      sarama.SyncProducer
	mu            sync.Mutex // one transaction at a time: the claims share the producer
	committed     int
	aborted       int
	transactions  int
	sessions      int
	done          context.CancelFunc
}

func (c *copier) Setup(sarama.ConsumerGroupSession) error {
	c.mu.Lock()
	c.sessions++
	c.mu.Unlock()
	return nil
}

func (c *copier) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim copies one partition a batch at a time, until the session ends.
func (c *copier) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		var batch []*sarama.ConsumerMessage
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			batch = append(batch, m)
		case <-session.Context().Done():
			return nil
		}
		for more := true; more && len(batch) < perTransaction; {
			select {
			case m, ok := <-claim.Messages():
				if ok {
					batch = append(batch, m)
				}
				more = ok
			case <-time.After(20 * time.Millisecond):
				more = false
			}
		}
		if !c.copy(session, batch) {
			return nil
		}
	}
}

// copy runs one transaction; false when it was aborted or the copy is complete, and the
// session must end.
func (c *copier) copy(session sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.committed >= c.records || session.Context().Err() != nil {
		return false
	}
	if err := c.producer.BeginTxn(); err != nil {
		fail("begin: %v", err)
	}
	out := make([]*sarama.ProducerMessage, len(batch))
	for i, m := range batch {
		out[i] = &sarama.ProducerMessage{Topic: c.target, Value: sarama.ByteEncoder(m.Value)}
	}
	if err := c.producer.SendMessages(out); err != nil {
		fail("send: %v", err)
	}
	last := batch[len(batch)-1]
	offsets := map[string][]*sarama.PartitionOffsetMetadata{last.Topic: {{Partition: last.Partition, Offset: last.Offset + 1}}}
	if err := c.producer.AddOffsetsToTxnWithGroupMetadata(offsets, sarama.NewConsumerGroupMetadataFromSession(session, c.group, nil)); err != nil {
		fail("add offsets: %v", err)
	}
	c.transactions++
	if c.transactions%3 == 0 {
		if err := c.producer.AbortTxn(); err != nil {
			fail("abort: %v", err)
		}
		c.aborted += len(batch)
		c.done() // a new session rewinds every partition to the group's committed offsets
		return false
	}
	if err := c.producer.CommitTxn(); err != nil {
		fail("commit: %v", err)
	}
	c.committed += len(batch)
	if c.committed >= c.records {
		c.done()
		return false
	}
	return true
}

func main() {
	if len(os.Args) != 7 {
		fail("usage: sarama_eos BOOTSTRAP SOURCE TARGET GROUP RECORDS KAFKA_VERSION")
	}
	bootstrap, source, target, group := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	records, err := strconv.Atoi(os.Args[5])
	if err != nil {
		fail("RECORDS: %v", err)
	}
	version, err := sarama.ParseKafkaVersion(os.Args[6])
	if err != nil {
		fail("KAFKA_VERSION: %v", err)
	}
	time.AfterFunc(90*time.Second, func() { fail("overall time limit reached") })
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)

	pc := sarama.NewConfig()
	pc.ClientID = "kgc-e2e-sarama-eos"
	pc.Version = version
	pc.Net.MaxOpenRequests = 1
	pc.Producer.RequiredAcks = sarama.WaitForAll
	pc.Producer.Idempotent = true
	pc.Producer.Return.Successes = true
	pc.Producer.Transaction.ID = "sarama-copier-" + group
	producer, err := sarama.NewSyncProducer([]string{bootstrap}, pc)
	if err != nil {
		fail("new producer: %v", err)
	}
	cc := sarama.NewConfig()
	cc.ClientID = "kgc-e2e-sarama-eos"
	cc.Version = version
	cc.Consumer.IsolationLevel = sarama.ReadCommitted
	cc.Consumer.Offsets.AutoCommit.Enable = false
	cc.Consumer.Offsets.Initial = sarama.OffsetOldest
	consumer, err := sarama.NewConsumerGroup([]string{bootstrap}, group, cc)
	if err != nil {
		fail("new consumer group: %v", err)
	}
	deadline, stop := context.WithTimeout(context.Background(), 80*time.Second)
	defer stop()
	c := &copier{target: target, group: group, records: records, producer: producer}
	for {
		session, done := context.WithCancel(deadline)
		c.done = done
		if err := consumer.Consume(session, []string{source}, c); err != nil {
			fail("consume: %v", err)
		}
		done()
		c.mu.Lock()
		finished := c.committed >= c.records
		c.mu.Unlock()
		if finished {
			break
		}
		if deadline.Err() != nil {
			fail("committed %d of %d records in time", c.committed, records)
		}
	}
	if err := consumer.Close(); err != nil {
		fail("close consumer: %v", err)
	}
	if err := producer.Close(); err != nil {
		fail("close producer: %v", err)
	}
	out, _ := json.Marshal(map[string]int{"committed": c.committed, "aborted": c.aborted,
		"transactions": c.transactions, "sessions": c.sessions})
	fmt.Println(string(out))
}
