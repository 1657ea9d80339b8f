"""Builds the optional C kernels (aioproducer._speedups._kernels); metadata is in pyproject.toml.

Without a working compiler the install still succeeds: the extension is
optional and aioproducer then runs its pure-Python code (same bytes, slower).
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError


class OptionalBuildExt(build_ext):
    """Warns, instead of failing, when the kernels cannot be compiled.

    ``optional=True`` already turns a failed compile into a warning; this also
    covers a machine where no compiler can be set up at all.
    """

    def run(self) -> None:
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError, OSError) as exc:
            self.warn(f"aioproducer: C kernels not built ({exc}); using pure Python")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except (CCompilerError, ExecError, PlatformError, OSError) as exc:
            self.warn(f"aioproducer: C kernels not built ({exc}); using pure Python")


setup(
    ext_modules=[
        Extension(
            "aioproducer._speedups._kernels",
            sources=["aioproducer/_speedups/_kernels.c", "aioproducer/_speedups/_batch_core.c",
                     "aioproducer/_speedups/_layout.c",
                     "aioproducer/_speedups/_builder.c", "aioproducer/_speedups/_builder_io.c",
                     "aioproducer/_speedups/_builder_run.c",
                     "aioproducer/_speedups/_columns.c", "aioproducer/_speedups/_lanes.c",
                     "aioproducer/_speedups/_shortcut.c",
                     "aioproducer/_speedups/_handle.c", "aioproducer/_speedups/_outcome.c",
                     "aioproducer/_speedups/_wake.c",
                     "aioproducer/_speedups/_counter.c"],
            depends=["aioproducer/_speedups/_varint.h", "aioproducer/_speedups/_partitioning.h",
                     "aioproducer/_speedups/_state.h", "aioproducer/_speedups/_outcome_layout.h",
                     "aioproducer/_speedups/_builder.h", "aioproducer/_speedups/_builder_internal.h",
                     "aioproducer/_speedups/_crc32c.h", "aioproducer/_speedups/_counter.h",
                     "aioproducer/_speedups/_batch_core.h",
                     "aioproducer/_speedups/_lanes.h"],
            optional=True,
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
