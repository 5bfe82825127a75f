import { DataBuffer, DenoBuffer, Parser, State } from '@nats-io/transport-node';

/**
 * The NATS client's protocol parser gathers a message that spans socket reads in a buffer that starts at the size
 * of the first read's share and, whenever a later read does not fit, is reallocated to twice its capacity plus
 * the read, with what it has copied over. An ingest message of ~350 KiB arriving in 64 KiB reads cost three
 * allocations (~700 KiB zeroed, then copied; 629 MB for 728 messages in an instrumented bench run, where reads
 * came in uneven sizes): 6 % of the main thread's samples, and garbage the next collections had to find. The
 * parser knows the message's whole size (its MSG/HMSG line) before the payload's first byte, so once a payload
 * spans reads its buffer is replaced by one of that size: one more allocation, after which each read is copied
 * once.
 *
 * This reaches into the client's parser (`@nats-io/nats-core` 3.x, whose package exports it for transports): it
 * wraps `Parser.prototype.parse` and replaces, between two reads, the buffer the parser just started with one
 * of the message's size holding the same bytes. Where the parser is not shaped as expected, nothing is changed
 * (`presizeMessageBuffers` answers false); test/integration/client-buffers.int.test.ts checks the bytes through it.
 */

interface ParserState {
  state: number;
  ma?: { size: number };
  msgBuf?: DenoBuffer;
}

/** The parts of the client's DenoBuffer this relies on (TypeScript sees `_buf` as private). */
interface BufferState {
  _buf: Uint8Array;
  _off: number;
}

const PATCHED = Symbol.for('svc.nats.presizedMessageBuffers');
const PRESIZED = Symbol.for('svc.nats.presizedBuffers');

/**
 * The buffers `presize` made: each holds one message (its headers and payload) and nothing else. Kept beside the
 * patch, process-wide: a second copy of this module (a test runner's) sees the buffers the patch made.
 */
const globals = globalThis as { [PRESIZED]?: WeakSet<ArrayBufferLike> };
globals[PRESIZED] ??= new WeakSet<ArrayBufferLike>();
const presized = globals[PRESIZED];

/**
 * Whether `data` (a received message's payload) lies in a buffer of its own, made for its message alone: then
 * that buffer may be moved to another thread instead of copied, once nothing reads the message's payload or
 * headers here any more. A message within one socket read is a view of that read, shared with others (and one
 * whose payload ends exactly where a read ends stays in the client's own copy): both are answered false.
 */
export function inOwnBuffer(data: Uint8Array): boolean {
  return presized.has(data.buffer);
}

/** The parser's buffer for a message spanning reads, swapped for one of the message's whole size. */
function presize(p: ParserState): void {
  const buf = p.msgBuf;
  const size = p.ma?.size ?? -1;
  if (buf === undefined || p.state !== State.MSG_PAYLOAD || size <= buf.capacity) return;
  const have = buf.bytes({ copy: false });
  // Not zeroed first: the parser writes every byte up to `size` before it hands the message over.
  const whole = new Uint8Array(Buffer.allocUnsafeSlow(size).buffer, 0, size);
  whole.set(have);
  presized.add(whole.buffer);
  const sized = new DenoBuffer();
  const raw = sized as unknown as BufferState;
  // The bytes so far, over a buffer whose capacity is the whole message: later reads append by reslicing.
  raw._buf = whole.subarray(0, have.byteLength);
  raw._off = 0;
  p.msgBuf = sized;
}

/** Applies the change to every connection of this process (once); false when the parser is not as expected. */
export function presizeMessageBuffers(): boolean {
  const proto = Parser.prototype as unknown as Record<PropertyKey, unknown> & {
    parse: (this: ParserState, buf: Uint8Array) => void;
  };
  if (proto[PATCHED] === true) return true;
  const probe = new DenoBuffer() as unknown as Partial<BufferState>;
  const shaped =
    typeof proto.parse === 'function' &&
    typeof State.MSG_PAYLOAD === 'number' &&
    probe._buf instanceof Uint8Array &&
    probe._off === 0 &&
    typeof Object.getOwnPropertyDescriptor(DenoBuffer.prototype, 'capacity')?.get === 'function';
  if (!shaped) return false;
  const parse = proto.parse;
  proto.parse = function (this: ParserState, buf: Uint8Array): void {
    parse.call(this, buf);
    presize(this);
  };
  proto[PATCHED] = true;
  return true;
}

/** The parts of the client's outbound DataBuffer `pack` works on. */
interface OutboundState {
  buffers: Uint8Array[];
  byteLength: number;
}

const PACK_PATCHED = Symbol.for('svc.nats.unzeroedOutboundPack');

/**
 * Before each write to the socket the client packs what it queued (a publish: its command line, headers, payload
 * and CRLF) into one array made with `new Uint8Array`, zeroed before the pieces are copied over it: for an ingest
 * body, ~350 KiB zeroed per publish on the main thread. This makes that array without zeroing it; the copy that
 * follows writes every byte (the pieces' lengths sum to `byteLength`, which is how the client sized it). The same
 * guard as above: where `DataBuffer` is not as expected, nothing changes.
 */
export function packOutboundWithoutZeroing(): boolean {
  const proto = DataBuffer.prototype as unknown as Record<PropertyKey, unknown> & {
    pack: (this: OutboundState) => void;
  };
  if (proto[PACK_PATCHED] === true) return true;
  const probe = new DataBuffer() as unknown as Partial<OutboundState>;
  if (typeof proto.pack !== 'function' || !Array.isArray(probe.buffers) || probe.byteLength !== 0)
    return false;
  proto.pack = function (this: OutboundState): void {
    const parts = this.buffers;
    if (parts.length <= 1) return;
    let total = 0;
    for (const b of parts) total += b.byteLength;
    // Sized by the pieces themselves, so every byte of it is written whatever byteLength says.
    const packed = new Uint8Array(Buffer.allocUnsafeSlow(total).buffer, 0, total);
    let at = 0;
    for (const b of parts) {
      packed.set(b, at);
      at += b.byteLength;
    }
    parts.length = 0;
    parts.push(packed);
  };
  proto[PACK_PATCHED] = true;
  return true;
}
