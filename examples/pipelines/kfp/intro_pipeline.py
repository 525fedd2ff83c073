"""Two chained container components from AppDefs, compiled to a KFP v2 pipeline (IR YAML).

TorchX's ``examples/pipelines/kfp/intro_pipeline.py`` on tx-pipelines-kfp (the KFP v2 SDK):
``tx.components.utils`` builds the AppDefs, ``container_from_app`` (TorchX's name) turns each
into a task of the pipeline, ``.after`` chains them; kfp's compiler writes the pipeline file a
Kubeflow Pipelines server runs (upload it, or ``kfp.Client().create_run_from_pipeline_package``).

    python examples/pipelines/kfp/intro_pipeline.py --output pipeline.yaml
"""
import argparse

from kfp import compiler, dsl

from tx.components import utils
from tx_pipelines_kfp.adapter import container_from_app

IMAGE = "python:3.11"

#: a component of tx's: python -c, with one CPU and 256 MiB
greet = utils.python(c="print('hello from KFP')", image=IMAGE, cpu=1, memMB=256)
#: another, with an argument
echo = utils.echo(msg="the first step is done", image=IMAGE)


@dsl.pipeline(name="intro-pipeline", description="two tx components, chained")
def pipeline() -> None:
    first = container_from_app(greet)
    container_from_app(echo).after(first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="pipeline.yaml", help="where to write the compiled pipeline")
    args = parser.parse_args()
    compiler.Compiler().compile(pipeline, args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
