"""Builds the optional C kernels (aioproducer._speedups._kernels); metadata is in pyproject.toml.

Without a working compiler the install still succeeds: the extension is
optional and aioproducer then runs its pure-Python code (same bytes, slower).
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Warns, instead of failing, when the kernels cannot be compiled."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler at all (e.g. distutils cannot find one)
            self.warn(f"aioproducer: C kernels not built ({exc}); using pure Python")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            self.warn(f"aioproducer: C kernels not built ({exc}); using pure Python")


setup(
    ext_modules=[
        Extension(
            "aioproducer._speedups._kernels",
            sources=["aioproducer/_speedups/_kernels.c"],
            optional=True,
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
