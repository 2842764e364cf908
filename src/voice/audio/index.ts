/**
 * Audio formats at Troupe's edges: base64 PCM16 and WAV, G.711, resampling, Ogg
 * pages and Ogg/Opus. Inside Troupe audio is mono PCM16 (`Int16Array`).
 */
export {
  PCM16_SAMPLE_RATE,
  Pcm16Decoder,
  encodePcm16Base64,
  float32ToInt16,
  int16ToFloat32,
  readWav,
  samplesToMs,
  writeWav,
} from './pcm.js';
export type { WavAudio } from './pcm.js';
export {
  G711_SAMPLE_RATE,
  decodeG711,
  decodeG711Base64,
  encodeG711,
  pcmToAlaw,
  pcmToMulaw,
} from './g711.js';
export type { G711Law } from './g711.js';
export {
  DEFAULT_RESAMPLER_ATTENUATION_DB,
  DEFAULT_RESAMPLER_PASSBAND,
  MAX_SAMPLE_RATE_HZ,
  MIN_SAMPLE_RATE_HZ,
  createResampler,
  resample,
} from './resample.js';
export type { Resampler, ResamplerOptions } from './resample.js';
export {
  MAX_OGG_PACKET_BYTES,
  MAX_OGG_PAGE_BYTES,
  OggReader,
  OggWriter,
  oggCrc32,
  oggPageCrc,
} from './ogg.js';
export type { OggPacket, OggPageOptions } from './ogg.js';
export {
  OGG_OPUS_DEFAULT_FRAMES_PER_PAGE,
  OGG_OPUS_DEFAULT_FRAME_MS,
  OGG_OPUS_DEFAULT_SAMPLE_RATE,
  OggOpusDecoder,
  OggOpusEncoder,
} from './ogg-opus.js';
export type { OggOpusDecoderOptions, OggOpusEncoderOptions } from './ogg-opus.js';
