import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Java's KafkaProducer in the throughput benchmark's patterns (see benchmarks/clients/_common.py).
 *
 * <pre>java -cp 'libs/*:classes' ProducerBench --bootstrap B --topic T --pattern a|b --records N
 *     --size BYTES --linger-ms MS --batch-size BYTES --idempotence on|off --compression CODEC
 *     --warmup-records N</pre>
 *
 * a: send(record, callback) per record, then flush(); b: the same, keeping every Future, then
 * get() on 1,000 Futures at a time. Records are unkeyed, values random bytes of --size, acks=all.
 *
 * Protocol with the parent process (benchmarks/clients/java.py), one JSON line each way on
 * stdout and a plain line on stdin, so that the parent can read this process's CPU time at the
 * edges of the measured span: after the warm-up record is acknowledged it prints
 * {"event":"ready"} and waits for a line on stdin; then it starts the clock, produces, waits for
 * every acknowledgement, stops the clock, prints {"event":"done",...} and waits for a line again
 * before closing the producer. Logging goes to stderr.
 */
public final class ProducerBench {
    private ProducerBench() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parse(argv);
        String topic = args.get("topic");
        String pattern = args.getOrDefault("pattern", "a");
        int records = Integer.parseInt(args.getOrDefault("records", "200000"));
        int size = Integer.parseInt(args.getOrDefault("size", "100"));
        int chunk = Integer.parseInt(args.getOrDefault("chunk", "1000"));
        int warmup = Integer.parseInt(args.getOrDefault("warmup-records", "1"));
        if (!pattern.equals("a") && !pattern.equals("b")) {
            throw new IllegalArgumentException("pattern must be a or b, got " + pattern);
        }

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "java-producer-bench");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, args.getOrDefault("linger-ms", "5"));
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, args.getOrDefault("batch-size", "16384"));
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
                  String.valueOf("on".equals(args.getOrDefault("idempotence", "on"))));
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, args.getOrDefault("compression", "none"));

        byte[] value = new byte[size];
        new Random().nextBytes(value);  // random: a compressing producer gains nothing
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        com.sun.management.OperatingSystemMXBean os =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            // Warm-up: connections, metadata, producer id, and (with more than one record) the JIT
            // compiler's work on the send path, all before the measured span.
            for (int i = 1; i < warmup; i++) {
                producer.send(new ProducerRecord<>(topic, value));
            }
            producer.send(new ProducerRecord<>(topic, value)).get(120, TimeUnit.SECONDS);
            producer.flush();
            emit("{\"event\":\"ready\"}");
            stdin.readLine();

            AtomicLong acked = new AtomicLong();
            AtomicLong failed = new AtomicLong();
            AtomicReference<Exception> firstError = new AtomicReference<>();
            Callback callback = (RecordMetadata md, Exception exc) -> {
                if (exc == null) {
                    acked.incrementAndGet();
                } else {
                    failed.incrementAndGet();
                    firstError.compareAndSet(null, exc);
                }
            };
            long cpu0 = os.getProcessCpuTime();  // every thread of the JVM: sender, GC, JIT
            long t0 = System.nanoTime();
            if (pattern.equals("a")) {
                for (int i = 0; i < records; i++) {
                    producer.send(new ProducerRecord<>(topic, value), callback);
                }
                producer.flush();
            } else {
                List<Future<RecordMetadata>> futures = new ArrayList<>(records);
                for (int i = 0; i < records; i++) {
                    futures.add(producer.send(new ProducerRecord<>(topic, value), callback));
                }
                for (int start = 0; start < records; start += chunk) {
                    int end = Math.min(records, start + chunk);
                    for (int i = start; i < end; i++) {
                        try {
                            futures.get(i).get();
                        } catch (java.util.concurrent.ExecutionException exc) {
                            // counted by the callback
                        }
                    }
                }
            }
            long wallNs = System.nanoTime() - t0;
            long cpuNs = os.getProcessCpuTime() - cpu0;
            Exception err = firstError.get();
            emit("{\"event\":\"done\",\"wall_ns\":" + wallNs + ",\"jvm_cpu_ns\":" + cpuNs
                 + ",\"acked\":" + acked.get() + ",\"failed\":" + failed.get()
                 + ",\"first_error\":" + (err == null ? "null" : quote(err.toString())) + "}");
            stdin.readLine();
        }
    }

    private static void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> out = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("expected --name value pairs, got " + argv[i]);
            }
            out.put(argv[i].substring(2), argv[++i]);
        }
        for (String required : new String[] {"bootstrap", "topic"}) {
            if (!out.containsKey(required)) {
                throw new IllegalArgumentException("--" + required + " is required");
            }
        }
        return out;
    }

    private static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }
}
