// Serializes a fixed sample of Kafka messages with the kafka-clients jar's own
// generated classes (ProduceRequestData, ...) and prints "<name> <version> <hex>"
// per line: golden frames for tests/unit/test_generated_messages_java.py.

import java.nio.ByteBuffer;
import java.util.List;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.ApiVersionsResponseData;
import org.apache.kafka.common.message.InitProducerIdRequestData;
import org.apache.kafka.common.message.MetadataRequestData;
import org.apache.kafka.common.message.MetadataResponseData;
import org.apache.kafka.common.message.ProduceRequestData;
import org.apache.kafka.common.message.ProduceResponseData;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.record.internal.MemoryRecords;

public final class GoldenMessages {
    static final Uuid TOPIC_ID = new Uuid(0x0123456789abcdefL, 0x1122334455667788L);

    static void print(String name, Message message, int version) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        int size = message.size(cache, (short) version);
        ByteBuffer buf = ByteBuffer.allocate(size);
        message.write(new ByteBufferAccessor(buf), cache, (short) version);
        StringBuilder hex = new StringBuilder();
        for (byte b : buf.array()) {
            hex.append(String.format("%02x", b));
        }
        System.out.println(name + " " + version + " " + hex);
    }

    static ProduceRequestData produceRequest(boolean byId) {
        byte[] records = new byte[16];
        for (int i = 0; i < records.length; i++) {
            records[i] = (byte) (i * 7 + 1);
        }
        ProduceRequestData.TopicProduceData topic = new ProduceRequestData.TopicProduceData()
            .setPartitionData(List.of(
                new ProduceRequestData.PartitionProduceData()
                    .setIndex(0).setRecords(MemoryRecords.readableRecords(ByteBuffer.wrap(records))),
                new ProduceRequestData.PartitionProduceData().setIndex(7).setRecords(null)));
        if (byId) {
            topic.setTopicId(TOPIC_ID);
        } else {
            topic.setName("topic-é");
        }
        ProduceRequestData.TopicProduceDataCollection topics =
            new ProduceRequestData.TopicProduceDataCollection();
        topics.add(topic);
        return new ProduceRequestData()
            .setTransactionalId("txn-1").setAcks((short) -1).setTimeoutMs(30000).setTopicData(topics);
    }

    static ProduceResponseData produceResponse(boolean tagged) {
        ProduceResponseData.TopicProduceResponseCollection topics =
            new ProduceResponseData.TopicProduceResponseCollection();
        topics.add(new ProduceResponseData.TopicProduceResponse()
            .setName("t")
            .setPartitionResponses(List.of(
                new ProduceResponseData.PartitionProduceResponse()
                    .setIndex(3).setErrorCode((short) 0).setBaseOffset(1234567890123L)
                    .setLogAppendTimeMs(-1).setLogStartOffset(17),
                new ProduceResponseData.PartitionProduceResponse()
                    .setIndex(4).setErrorCode((short) 6).setBaseOffset(-1)
                    .setRecordErrors(List.of(new ProduceResponseData.BatchIndexAndErrorMessage()
                        .setBatchIndex(2).setBatchIndexErrorMessage("bad")))
                    .setErrorMessage("not leader")
                    .setCurrentLeader(tagged
                        ? new ProduceResponseData.LeaderIdAndEpoch().setLeaderId(2).setLeaderEpoch(9)
                        : new ProduceResponseData.LeaderIdAndEpoch()))));
        ProduceResponseData.NodeEndpointCollection nodes = new ProduceResponseData.NodeEndpointCollection();
        if (!tagged) {
            return new ProduceResponseData().setResponses(topics).setThrottleTimeMs(5);
        }
        nodes.add(new ProduceResponseData.NodeEndpoint()
            .setNodeId(2).setHost("broker-2").setPort(9093).setRack(null));
        return new ProduceResponseData().setResponses(topics).setThrottleTimeMs(5).setNodeEndpoints(nodes);
    }

    static MetadataRequestData metadataRequest(boolean byId) {
        return new MetadataRequestData()
            .setTopics(List.of(
                new MetadataRequestData.MetadataRequestTopic().setName("a"),
                byId
                    ? new MetadataRequestData.MetadataRequestTopic().setTopicId(TOPIC_ID).setName(null)
                    : new MetadataRequestData.MetadataRequestTopic().setName("b")))
            .setAllowAutoTopicCreation(false)
            .setIncludeTopicAuthorizedOperations(true);
    }

    static MetadataResponseData metadataResponse() {
        MetadataResponseData.MetadataResponseBrokerCollection brokers =
            new MetadataResponseData.MetadataResponseBrokerCollection();
        brokers.add(new MetadataResponseData.MetadataResponseBroker()
            .setNodeId(1).setHost("h1").setPort(9092).setRack("r1"));
        brokers.add(new MetadataResponseData.MetadataResponseBroker()
            .setNodeId(2).setHost("h2").setPort(9093).setRack(null));
        MetadataResponseData.MetadataResponseTopicCollection topics =
            new MetadataResponseData.MetadataResponseTopicCollection();
        topics.add(new MetadataResponseData.MetadataResponseTopic()
            .setErrorCode((short) 0).setName("a").setTopicId(TOPIC_ID).setIsInternal(false)
            .setPartitions(List.of(new MetadataResponseData.MetadataResponsePartition()
                .setErrorCode((short) 0).setPartitionIndex(0).setLeaderId(1).setLeaderEpoch(4)
                .setReplicaNodes(List.of(1, 2)).setIsrNodes(List.of(1)).setOfflineReplicas(List.of(2))))
            .setTopicAuthorizedOperations(0x0ff8));
        return new MetadataResponseData()
            .setThrottleTimeMs(0).setBrokers(brokers).setClusterId("cluster")
            .setControllerId(1).setTopics(topics);
    }

    static InitProducerIdRequestData initProducerId(int version) {
        InitProducerIdRequestData data = new InitProducerIdRequestData()
            .setTransactionalId("txn-1").setTransactionTimeoutMs(60000);
        return version < 3 ? data : data.setProducerId(42).setProducerEpoch((short) 3);
    }

    static ApiVersionsResponseData apiVersionsResponse() {
        ApiVersionsResponseData.ApiVersionCollection keys = new ApiVersionsResponseData.ApiVersionCollection();
        keys.add(new ApiVersionsResponseData.ApiVersion()
            .setApiKey((short) 0).setMinVersion((short) 3).setMaxVersion((short) 13));
        keys.add(new ApiVersionsResponseData.ApiVersion()
            .setApiKey((short) 18).setMinVersion((short) 0).setMaxVersion((short) 4));
        ApiVersionsResponseData.SupportedFeatureKeyCollection supported =
            new ApiVersionsResponseData.SupportedFeatureKeyCollection();
        supported.add(new ApiVersionsResponseData.SupportedFeatureKey()
            .setName("transaction.version").setMinVersion((short) 0).setMaxVersion((short) 2));
        ApiVersionsResponseData.FinalizedFeatureKeyCollection finalized =
            new ApiVersionsResponseData.FinalizedFeatureKeyCollection();
        finalized.add(new ApiVersionsResponseData.FinalizedFeatureKey()
            .setName("transaction.version").setMaxVersionLevel((short) 2).setMinVersionLevel((short) 2));
        return new ApiVersionsResponseData()
            .setErrorCode((short) 0).setApiKeys(keys).setThrottleTimeMs(0)
            .setSupportedFeatures(supported).setFinalizedFeaturesEpoch(7)
            .setFinalizedFeatures(finalized).setZkMigrationReady(false);
    }

    public static void main(String[] args) {
        for (int v : new int[] {3, 9, 11, 12}) {
            print("ProduceRequest", produceRequest(false), v);
        }
        print("ProduceRequest", produceRequest(true), 13);
        print("ProduceResponse", produceResponse(false), 8);
        for (int v : new int[] {10, 12}) {
            print("ProduceResponse", produceResponse(true), v);
        }
        for (int v : new int[] {8, 9, 12}) {
            print("MetadataRequest", metadataRequest(v >= 10), v);
        }
        for (int v : new int[] {8, 9, 12}) {
            print("MetadataResponse", metadataResponse(), v);
        }
        for (int v : new int[] {0, 2, 5}) {
            print("InitProducerIdRequest", initProducerId(v), v);
        }
        for (int v : new int[] {1, 3, 4}) {
            print("ApiVersionsResponse", apiVersionsResponse(), v);
        }
    }
}
