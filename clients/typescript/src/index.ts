// @fermata/client: the typed TypeScript client of fermata, the durable timer service.
export { FermataClient, type AddManyResult, type CancelOptions, type ClientOptions, type ListOptions } from './client.ts';
export { AddStream } from './add-stream.ts';
export { clientErrorCodes, FermataError, type ErrorBody } from './errors.ts';
export { defaultRetryPolicy, type RetryPolicy } from './retry.ts';
export type { Protocol, TlsOptions } from './transport.ts';
export type * from './types.ts';
export { type Delivery, type DeliveryHeaders, DeliveryVerificationError, verifyDelivery } from './verify-delivery.ts';
export { arrowPieces, type ArrowPiece } from './arrow-batches.ts';
