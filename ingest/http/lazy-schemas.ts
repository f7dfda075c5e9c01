// Route schemas compiled when they are first needed instead of before the server may listen
// (main thread). fastify compiles every route's validators (ajv) and response serializers
// (fast-json-stringify) while it gets ready, and it gets ready before it listens: on a fresh
// start that is most of the time from "engine open" to "listening" (decision 0018). Here each
// route's compile waits for its first request, and `warmUp` compiles the ones still waiting
// after the server listens, one a turn of the event loop, so the first requests do not pay
// either. The compilers and their options are fastify's own defaults: what a schema accepts,
// refuses and writes is the same, only when the work is done changes.
import { AjvCompiler } from '@fastify/ajv-compiler';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

type BuildValidator = ReturnType<typeof AjvCompiler>;
type BuildSerializer = ReturnType<typeof SerializerSelector>;
type ValidatorCompiler = ReturnType<BuildValidator>;
type SerializerCompiler = ReturnType<BuildSerializer>;
type Validate = ReturnType<ValidatorCompiler>;
type Serialize = ReturnType<SerializerCompiler>;

/** A validator as fastify calls it: ajv's, whose `errors` it reads after a refusal. */
interface LazyValidate {
  (data: unknown, context?: unknown): ReturnType<Validate>;
  errors?: Validate['errors'];
  /** fastify passes the parent object (so that ajv may coerce a root value) when this is set, as every ajv validator has it. */
  schemaEnv?: Validate['schemaEnv'];
}

export class LazySchemas {
  readonly #waiting: Array<() => void> = [];
  #warming = false;

  /** fastify's `schemaController` option with both compilers deferred. */
  get controller(): NonNullable<FastifyServerOptions['schemaController']> {
    const buildValidator = AjvCompiler();
    const buildSerializer = SerializerSelector();
    return {
      compilersFactory: {
        buildValidator: (externalSchemas, options) => this.#validators(buildValidator(externalSchemas, options)),
        buildSerializer: (externalSchemas, options) => this.#serializers(buildSerializer(externalSchemas, options)),
      },
    };
  }

  /** Compiles every schema not compiled yet, one a turn, so that requests are served between them. */
  warmUp(): void {
    if (this.#warming) return;
    this.#warming = true;
    const next = (): void => {
      const compile = this.#waiting.shift();
      if (compile === undefined) {
        this.#warming = false;
        return;
      }
      compile();
      setImmediate(next).unref();
    };
    setImmediate(next).unref();
  }

  /** Schemas whose compile still waits (for tests and the start-up log). */
  get waiting(): number {
    return this.#waiting.length;
  }

  #validators(compiler: ValidatorCompiler): ValidatorCompiler {
    return ((route: Parameters<ValidatorCompiler>[0]) => {
      let compiled: Validate | undefined;
      const compile = (): Validate => (compiled ??= compiler(route));
      const validate: LazyValidate = (data, context) => {
        const real = compile();
        const valid = (real as (data: unknown, context?: unknown) => ReturnType<Validate>)(data, context);
        validate.errors = real.errors;
        return valid;
      };
      // ajv's validators always carry schemaEnv; fastify checks it before the first call.
      validate.schemaEnv = {} as Validate['schemaEnv'];
      this.#waiting.push(compile);
      return validate as unknown as Validate;
    }) as ValidatorCompiler;
  }

  #serializers(compiler: SerializerCompiler): SerializerCompiler {
    return (route) => {
      let compiled: Serialize | undefined;
      const compile = (): Serialize => (compiled ??= compiler(route));
      this.#waiting.push(compile);
      return (doc) => compile()(doc);
    };
  }
}
